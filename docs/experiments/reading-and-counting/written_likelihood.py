"""Issue 63, item 2: the linked name's likelihood under the reader. For every question whose written answer (the
served file, written_pool_again_1.5b.jsonl.gz) links to a character, the reader that wrote it (the 1.5B) scores,
after the very prompt it wrote from (the same passages, examples and listed characters; for a second write, the
question with "(The answer is not ...)"), two continuations: the text it wrote and the linked character's name as
the book's cast gives it. Their log-likelihoods (summed, and per token) are what a fit can weigh: does the reader's
own certainty say when its name is right?

    .venv/bin/python docs/experiments/reading-and-counting/written_likelihood.py --workspace ws51 \
        --out docs/experiments/reading-and-counting/written_likelihood_1.5b.jsonl.gz

Resumable (rows already in OUT are kept). `written_gate.py` then fits a gate on it by book-level CV.
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from whoqa.core.progress import bar
from whoqa.llm.reader import reading
from whoqa.retrieval.passages import PassageConfig
from whoqa.service import Service, ServiceConfig

HERE = Path(__file__).parent


def rows(path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return {r["key"]: r for r in map(json.loads, f)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--written", type=Path, default=HERE / "written_pool_again_1.5b.jsonl.gz")
    ap.add_argument("--first", type=Path, default=HERE / "written_pool_1.5b.jsonl.gz",
                    help="the first writes (the names a second write was told are not the answer)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    svc = Service(a.workspace, replace(ServiceConfig(), passages=replace(PassageConfig(), fusion="pool")))
    llm = svc.models.routes().llm
    base, cfg = svc.models.answering_llm(llm)
    reader = svc.models.llm(base, scores=True, cfg=cfg)
    pool = svc.models.pool(who=False)
    written, firsts, have = rows(a.written), rows(a.first), rows(a.out)
    todo = [r for r in written.values() if r.get("linked") and r["key"] not in have]
    for r in bar(todo, desc="likelihoods of written Who answers", unit="question"):
        t0 = time.perf_counter()
        ob = svc.open(r["book"])
        query = ob.query(r["question"])  # (as Service.written reads it)
        wins = svc.passages(ob, query)
        asked = query
        if r.get("again"):  # the second write's question, as write_again asked it
            passed = firsts[r["key"]]["named_passed"]
            names = " or ".join(dict.fromkeys(ob.book.characters[c].name for c in passed))
            asked = ob.query(f"{query.text} (The answer is not {names}.)")
        passages, starts, shots, listed = reading(ob, asked, wins, pool, cfg)
        name = ob.book.characters[r["linked"][0]].name
        text_ids, name_ids = reader._ids(r["text"]), reader._ids(name)
        ll_text, ll_name = reader.name_scores(asked.text, passages, [r["text"], name], shots, starts, cfg.order,
                                              characters=listed)
        row = {"key": r["key"], "book": r["book"], "text": r["text"], "name": name, "again": bool(r.get("again")),
               "correct": r.get("correct"), "ll_text": ll_text, "ll_text_per_token": ll_text / max(len(text_ids), 1),
               "ll_name": ll_name, "ll_name_per_token": ll_name / max(len(name_ids), 1),
               "seconds": round(time.perf_counter() - t0, 2), "llm": llm}
        with gzip.open(a.out, "at", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        have[r["key"]] = row
    got = [r for r in have.values()]
    right = [r for r in got if r["correct"]]
    wrong = [r for r in got if not r["correct"]]
    for k in ("ll_text_per_token", "ll_name_per_token"):
        m = lambda xs: sum(x[k] for x in xs) / max(len(xs), 1)  # noqa: E731
        print(f"{k}: right {m(right):.3f} ({len(right)}), wrong {m(wrong):.3f} ({len(wrong)})")


if __name__ == "__main__":
    main()
