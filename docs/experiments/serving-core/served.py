"""Issue 65: the answers `ask` serves, written whole (Answer.to_json without its seconds), so that two versions of the
serving code can be compared byte for byte on the same workspace and questions.

    PYTHONPATH=<checkout> .venv/bin/python docs/experiments/serving-core/served.py --workspace ws-readers \
        --questions data_prep/readers/questions.tsv --out served-<version>.jsonl
    cmp served-before.jsonl served-after.jsonl

Questions come from a readers' questions TSV (whoqa.evaluation.readers.load_questions), the first --per-kind of each
kind per book; books are resolved from --books by the TSV's file name.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--books", type=Path, default=Path("../shared/data/books-unlabeled"))
    ap.add_argument("--per-kind", type=int, default=4)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    from whoqa.evaluation.readers import load_questions
    from whoqa.service import Service
    svc = Service(a.workspace)
    seen: dict = {}
    rows = []
    for q in load_questions(a.questions):
        key = (q.book, q.kind)
        if seen.get(key, 0) >= a.per_kind:
            continue
        seen[key] = seen.get(key, 0) + 1
        book = svc.resolve(a.books / f"{q.book}.txt")
        try:
            got = svc.answer(book, q.question).to_json()
            got.pop("seconds", None)
        except Exception as e:  # noqa: BLE001 (a refusal is an answer too: its one line)
            got = {"question": q.question, "error": f"{type(e).__name__}: {e}"}
        rows.append(json.dumps(got, sort_keys=True))
        print(q.book, q.kind, (got.get("characters") or [{}])[0].get("name") if q.kind == "who" else
              got.get("answer"), flush=True)
    a.out.write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
