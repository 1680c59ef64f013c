"""Issue 64, item 1's last lever: window size and count within the reader's budget. The served passages ("pool": rrf
of BM25F's content-word search and MiniLM over its first 300 hits) cut into windows of W sentences around each hit
(merged where they overlap), taken in rank order while their words fit a budget (at least one); recall of an
answer-bearing window (issue 52's criterion: a span of ROUGE-L >= 0.5 against a gold answer) within that budget.
The reader's prompt holds about 512 tokens (LLMConfig.prompt_tokens), about 300 words of passages after its
instruction; the 1.5B's context would take more, at its reading speed's cost (37 tokens a second on 2 cores without
AVX-512).

    python docs/experiments/passages-and-first-answer/window_recall.py --workspace WS [--books 41] [--out DIR]

Writes DIR/window_recall.json (recall per width and budget, paired differences against the served 5-sentence windows
at the same budget, resampled by book) and DIR/window_recall.jsonl.gz (per question and arm: answer-bearing or not).
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np

from whoqa.core.lexicon import is_who_question
from whoqa.core.metrics import best_span_rouge_l, paired_book_bootstrap
from whoqa.core.store import load_questions
from whoqa.core.words import answer_tokens
from whoqa.core.workspace import Workspace
from whoqa.core.book import window_text
from whoqa.retrieval.bm25f import RetrievalConfig, windows
from whoqa.retrieval.openbook import open_book
from whoqa.retrieval.passages import DenseIndex, PassageConfig, encode

from pool_recall import bm25f_ranked, fused  # (this folder's: the served pool fusion's two steps)

WIDTHS = (1, 3, 5, 9)  # sentences a window holds around its hit (5 served)
BUDGETS = (150, 300, 600)  # words of passages read (300: about the served prompt)
THRESHOLD = 0.5


def ranked_sentences(ob, query, dense: DenseIndex, cfg: PassageConfig, rcfg: RetrievalConfig) -> list:
    """The served pool fusion's sentence ranking (before windows)."""
    ranked = bm25f_ranked(ob, query, rcfg)
    pool = [s for s, _ in ranked[:cfg.pool_sentences]]
    if not pool:
        return []
    return fused(ranked, pool, dense.vectors[pool] @ encode([query.text])[0], cfg)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--books", type=int, default=41)
    ap.add_argument("--out", default=str(Path(__file__).parent))
    a = ap.parse_args()
    ws = Workspace(a.workspace)
    by_book = load_questions(ws)
    books = sorted(b for b in by_book if (ws.books / b).is_dir())[:a.books]
    cfg, rcfg = PassageConfig(), RetrievalConfig()
    arms = [f"{w} sentences, {b} words" for b in BUDGETS for w in WIDTHS]
    rows, t0 = [], time.perf_counter()
    for book_id in books:
        ob = open_book(ws, book_id)
        book = ob.book
        dense = DenseIndex(book, ws.book_vectors(book_id))
        bearing: dict[tuple[int, int], bool] = {}
        for q in by_book[book_id]:
            if is_who_question(q["question"]):
                continue
            query = ob.query(q["question"])
            golds = [answer_tokens(q["answer1"]), answer_tokens(q["answer2"])]
            ranked = ranked_sentences(ob, query, dense, cfg, rcfg)
            row = {"book": book_id, "question_id": q["question_id"], "hit": {}, "windows": {}}
            for w in WIDTHS:
                wins = windows(ranked, 2 * max(BUDGETS) // 8, len(book.sentences), w)  # (enough for the budgets)
                for budget in BUDGETS:
                    used, got, n = 0, False, 0
                    for x, y, _ in wins:
                        text = window_text(book, int(x), int(y))
                        words = len(text.split())
                        if n and used + words > budget:
                            break
                        used, n = used + words, n + 1
                        if (x, y) not in bearing:
                            toks = answer_tokens(text)
                            bearing[(x, y)] = max(best_span_rouge_l(g, toks) for g in golds) >= THRESHOLD
                        got = got or bearing[(x, y)]
                    row["hit"][f"{w} sentences, {budget} words"] = got
                    row["windows"][f"{w} sentences, {budget} words"] = n
            rows.append(row)
            bearing.clear()  # (golds differ per question)
        print(f"{book_id}: {sum(1 for r in rows if r['book'] == book_id)} questions, "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    table = {arm: {"recall": round(100 * float(np.mean([r["hit"][arm] for r in rows])), 1),
                   "windows read (mean)": round(float(np.mean([r["windows"][arm] for r in rows])), 1)} for arm in arms}
    groups = [r["book"] for r in rows]
    for budget in BUDGETS:
        served = [[100.0 * r["hit"][f"5 sentences, {budget} words"]] for r in rows]
        for w in WIDTHS:
            if w != 5:
                arm = f"{w} sentences, {budget} words"
                table[arm]["minus 5 sentences, resampled by book"] = paired_book_bootstrap(
                    [[100.0 * r["hit"][arm]] for r in rows], served, groups, ("recall",))["difference"]["recall"]
    summary = {"criterion": f"a window read within the budget with a span of ROUGE-L >= {THRESHOLD} against a gold "
                            f"answer", "passages": "pool (served)", "books": len(books), "questions": len(rows),
               "seconds": round(time.perf_counter() - t0, 1), "arms": table}
    out = Path(a.out)
    (out / "window_recall.json").write_text(json.dumps(summary, indent=1) + "\n")
    with gzip.open(out / "window_recall.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    for arm, v in table.items():
        print(f"{arm:<26} {v['recall']:>5.1f}  windows {v['windows read (mean)']:>4.1f}  "
              + (f"{v['minus 5 sentences, resampled by book']['mean']:+.2f} "
                 f"({v['minus 5 sentences, resampled by book']['ci95'][0]:+.2f} to "
                 f"{v['minus 5 sentences, resampled by book']['ci95'][1]:+.2f})"
                 if "minus 5 sentences, resampled by book" in v else ""))


if __name__ == "__main__":
    main()
