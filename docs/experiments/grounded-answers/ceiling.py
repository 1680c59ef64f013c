"""Issue 52, where the served non-Who answers stop: the ceiling of what the passages they read hold, on books no reader
read (the main job's 10 unseen books), against what was served.

For each non-Who question the served retrieval (`PassageConfig()`: content words and characters, BM25F fused with
MiniLM by reciprocal rank) ranks the book's windows as `ask` does; the **oracle span** of the first k windows is the
best ROUGE-L (COCO's, beta 1.2, the eval's tokens: `normalize_text`) any contiguous span of them reaches against
either gold answer (`best_span_rouge_l`). Its mean over questions is what a perfect extractive reader of those k windows
would score: the ceiling the reader works under. The LLM is offered the first 5 and reads what fits (about 3).
The served answers (the records `whoqa eval --kinds other` wrote) are then split by whether an answer-bearing window
(oracle span >= 0.5) was among the first 3.

    .venv/bin/python docs/experiments/grounded-answers/ceiling.py --workspace ws/eval-data/unseen \
        [--records docs/experiments/grounded-answers/served_other_unseen.jsonl.gz]

Writes ceiling.json and ceiling.jsonl.gz (per question: the oracle span at each k) beside this file.
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from whoqa.core.lexicon import is_who_question
from whoqa.core.metrics import best_span_rouge_l, normalize_text, text_metrics
from whoqa.core.store import load_questions
from whoqa.core.workspace import Workspace
from whoqa.core.book import window_text
from whoqa.retrieval.openbook import open_book
from whoqa.retrieval.passages import DenseIndex, PassageConfig, passage_windows

KS = (1, 3, 5, 10)
BEARING = 0.5
HERE = Path(__file__).parent


def tokens(text: str) -> list[str]:
    return normalize_text(text).split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--records", type=Path, default=HERE / "served_other_unseen.jsonl.gz")
    args = ap.parse_args()
    ws = Workspace(args.workspace)
    by_book = load_questions(ws)
    rows, t0 = [], time.perf_counter()
    for b in sorted(b for b in by_book if (ws.books / b).is_dir()):
        ob = open_book(ws, b)
        dense = DenseIndex(ob.book, ws.book_vectors(b))
        for q in by_book[b]:
            if is_who_question(q["question"]):
                continue
            golds = [tokens(q["answer1"]), tokens(q["answer2"])]
            wins = passage_windows(ob.book, ob.index, ob.query(q["question"]), PassageConfig(), dense)[:max(KS)]
            per_window = [max(best_span_rouge_l(g, tokens(window_text(ob.book, int(a), int(e)))) for g in golds)
                          for a, e, _ in wins]
            rows.append({"book": b, "question_id": q["question_id"], "answers": [q["answer1"], q["answer2"]],
                         "oracle": {k: 100 * max(per_window[:k], default=0.0) for k in KS}})
        print(f"{b}: {sum(r['book'] == b for r in rows)} questions, {time.perf_counter() - t0:.0f}s", flush=True)
    n = len(rows)
    table = {f"oracle span ROUGE-L, first {k} windows": round(sum(r["oracle"][k] for r in rows) / n, 2) for k in KS}
    table.update({f"answer-bearing window (oracle >= {BEARING}) in the first {k}, %":
                  round(100 * sum(r["oracle"][k] >= 100 * BEARING for r in rows) / n, 1) for k in KS})
    served = {}
    if args.records.is_file():
        rec = {r["question_id"]: r for r in (json.loads(line) for line in gzip.open(args.records, "rt"))}
        for name, keep in (("all", lambda r: True), ("bearing in first 3", lambda r: r["oracle"][3] >= 100 * BEARING),
                           ("none bearing in first 3", lambda r: r["oracle"][3] < 100 * BEARING)):
            part = [r for r in rows if r["question_id"] in rec and keep(r)]
            if not part:
                continue
            shown = text_metrics([rec[r["question_id"]]["answer"] or "" for r in part], [r["answers"] for r in part])
            either = text_metrics([rec[r["question_id"]]["answer"] or rec[r["question_id"]].get("withheld") or ""
                                   for r in part], [r["answers"] for r in part])
            served[name] = {"questions": len(part),
                            "answered %": round(100 * sum(bool(rec[r["question_id"]]["answer"]) for r in part)
                                                / len(part), 1),
                            "served ROUGE-L (withheld = empty)": round(shown["rouge_l"], 2),
                            "served METEOR": round(shown["meteor"], 2),
                            "ROUGE-L with nothing withheld": round(either["rouge_l"], 2),
                            "oracle span, first 3": round(sum(r["oracle"][3] for r in part) / len(part), 2)}
    out = {"workspace": str(args.workspace), "questions": n, "books": len({r["book"] for r in rows}),
           "seconds": round(time.perf_counter() - t0, 1), "retrieval": "PassageConfig() (rrf: content BM25F + MiniLM)",
           "ceiling": table, "served, split by the ceiling": served}
    (HERE / "ceiling.json").write_text(json.dumps(out, indent=1) + "\n")
    with gzip.open(HERE / "ceiling.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if k != "answers"}) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
