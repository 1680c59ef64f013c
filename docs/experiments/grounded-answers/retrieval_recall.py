"""Issue 52, item 1: recall@5/10 of an answer-bearing window for a non-Who question, by passage retrieval.

A window (the 5-sentence windows `question_windows` builds, merged where they overlap) is answer-bearing when some
span of it reaches ROUGE-L >= 0.5 against one of the question's two gold answers, both sides as `answer_tokens` (lower
case, punctuation and function words dropped; `best_span_rouge_l`). Recall@k: the share of questions with an
answer-bearing window among their first k.

    python docs/experiments/grounded-answers/retrieval_recall.py --workspace WS [--books N] [--out DIR]

WS: a prepared workspace (`whoqa prepare`); every prepared book's non-Who questions are scored (first N books).
Writes DIR/recall.json (the table) and DIR/recall.jsonl.gz (per question: the first answer-bearing window's rank by
each retrieval, None when none in the first 10).
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from whoqa.core.lexicon import is_who_question
from whoqa.core.store import load_questions
from whoqa.core.metrics import best_span_rouge_l, paired_book_bootstrap
from whoqa.core.workspace import Workspace
from whoqa.core.book import window_text
from whoqa.core.words import answer_tokens
from whoqa.retrieval.openbook import open_book
from whoqa.retrieval.passages import DenseIndex, PassageConfig, passage_windows

RETRIEVALS = {  # name -> PassageConfig
    "bm25f question (old)": PassageConfig(query="question", fusion="bm25f"),
    "bm25f content": PassageConfig(query="content", fusion="bm25f"),
    "minilm": PassageConfig(query="content", fusion="dense"),
    "rrf bm25f question + minilm": PassageConfig(query="question", fusion="rrf"),
    "rrf bm25f content + minilm": PassageConfig(query="content", fusion="rrf"),
}
THRESHOLD = 0.5
KS = (1, 5, 10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--books", type=int, default=None)
    ap.add_argument("--out", default=str(Path(__file__).parent))
    args = ap.parse_args()
    ws = Workspace(args.workspace)
    by_book = load_questions(ws)
    books = sorted(b for b in by_book if (ws.books / b).is_dir())[:args.books]
    rows, t0 = [], time.perf_counter()
    for b in books:
        ob = open_book(ws, b)
        book = ob.book
        dense = DenseIndex(book, ws.book_vectors(b))
        cache: dict[tuple[int, int], list[str]] = {}
        for q in by_book[b]:
            if is_who_question(q["question"]):
                continue
            golds = [answer_tokens(q["answer1"]), answer_tokens(q["answer2"])]
            row = {"book": b, "question_id": q["question_id"], "question": q["question"], "rank": {}}
            for name, cfg in RETRIEVALS.items():
                wins = passage_windows(book, ob.index, ob.query(q["question"]), cfg, dense)[:max(KS)]
                rank = None
                for r, (a, e, _) in enumerate(wins, start=1):
                    if (a, e) not in cache:
                        cache[(a, e)] = answer_tokens(window_text(book, int(a), int(e)))
                    if max(best_span_rouge_l(g, cache[(a, e)]) for g in golds) >= THRESHOLD:
                        rank = r
                        break
                row["rank"][name] = rank
            rows.append(row)
        print(f"{b}: {sum(1 for r in rows if r['book'] == b)} questions, {time.perf_counter() - t0:.0f}s", flush=True)
    table = {name: {f"recall@{k}": round(100 * sum(1 for r in rows if r["rank"][name] is not None
                                                   and r["rank"][name] <= k) / max(1, len(rows)), 1) for k in KS}
             for name in RETRIEVALS}
    keys = [f"recall@{k}" for k in KS]

    def hits(name):
        return [[100.0 * (r["rank"][name] is not None and r["rank"][name] <= k) for k in KS] for r in rows]
    old = next(iter(RETRIEVALS))
    paired = {name: paired_book_bootstrap(hits(name), hits(old), [r["book"] for r in rows], keys)["difference"]
              for name in list(RETRIEVALS)[1:]} if rows else {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"criterion": f"a window with a span of ROUGE-L >= {THRESHOLD} against a gold answer (answer_tokens)",
               "books": books, "questions": len(rows), "seconds": round(time.perf_counter() - t0, 1),
               "recall": table, f"minus {old}, resampled by book": paired}
    (out / "recall.json").write_text(json.dumps(summary, indent=1) + "\n")
    with gzip.open(out / "recall.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
