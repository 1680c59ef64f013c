"""Issue 64, item 1: the characters a question names, searched by their resolved mentions (served: BM25F's character
field, so "he" in a sentence counts for the person it resolves to) against the names as plain words (no character
field: a name matches only where the book's words spell it outside a resolved mention). Recall@k of an answer-bearing
window (issue 52's criterion) on the main job's 10 unseen books' other questions, passages as served ("pool").

    python docs/experiments/passages-and-first-answer/names_recall.py --target EMPTY/eval-data/unseen
"""
from __future__ import annotations

import argparse
import gzip
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from whoqa.core.metrics import paired_book_bootstrap
from whoqa.core.words import answer_tokens
from whoqa.evaluation.unseen import other_questions
from whoqa.retrieval.passages import PassageConfig
from whoqa.service.answers import Service
from whoqa.service.schema import ServiceConfig

from pool_recall import KS, THRESHOLD, first_bearing  # (this folder's: the recall criterion)

HERE = Path(__file__).parent
ARMS = ("served: names by their resolved mentions", "names as plain words (no character field)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=Path, required=True, help="the unseen books' prepared folder (eval-data/unseen)")
    a = ap.parse_args()
    svc = Service(a.target, ServiceConfig(), fits_from=a.target.parents[1])
    cfg, rows, texts_by_book = PassageConfig(), [], {}
    for q in other_questions(a.target):
        ob = svc.open(q["document_id"])
        texts = texts_by_book.setdefault(ob.id, {})
        golds = [answer_tokens(q["answer1"]), answer_tokens(q["answer2"])]
        query = ob.query(q["question"])
        plain = replace(query, spans=())  # (no span names a character: its words stay words)
        rows.append({"question_id": q["question_id"], "book": ob.id, "names": bool(query.characters),
                     "rank": {arm: first_bearing(ob.book, ob.passages(x, cfg), golds, texts)
                              for arm, x in zip(ARMS, (query, plain))}})
    keys = [f"recall@{k}" for k in KS]

    def hits(arm, sub):
        return [[100.0 * (r["rank"][arm] is not None and r["rank"][arm] <= k) for k in KS] for r in sub]

    out = {"criterion": f"a window with a span of ROUGE-L >= {THRESHOLD} against a gold answer"}
    for label, sub in (("all", rows), ("naming a character", [r for r in rows if r["names"]])):
        out[label] = {"questions": len(sub), "recall": {
            arm: dict(zip(keys, (round(float(np.mean(c)), 1) for c in np.array(hits(arm, sub)).T))) for arm in ARMS},
            "plain minus served, resampled by book": paired_book_bootstrap(
                hits(ARMS[1], sub), hits(ARMS[0], sub), [r["book"] for r in sub], keys)["difference"]}
    (HERE / "names_recall.json").write_text(json.dumps(out, indent=1) + "\n")
    with gzip.open(HERE / "names_recall.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
