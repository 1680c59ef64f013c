"""Issue 64, item 1: the event's verb and objects weighted over the question's other words. BM25F already weighs a
word by its rarity in the book (its IDF over the book's sentences: "portrait" in a book about a portrait counts
little) and searches the characters a question names by their resolved mentions; this weighs, in addition, the words
of the event the question asks about: the verbs the question hangs from and their objects (spaCy's parse of the
question), each counted `boost` times in the BM25F query (Lucene's BoostQuery), then MiniLM over the first 300 hits
and reciprocal rank fusion as served ("pool").

Recall@k of an answer-bearing window (issue 52's criterion: a span of ROUGE-L >= 0.5 against a gold answer) on every
non-Who question of the workspace's books (the 41 shared books: 873), against the served pool:

    python docs/experiments/passages-and-first-answer/event_recall.py --workspace ws51 [--books 41]
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np

from whoqa.core.lexicon import is_who_question, load_nlp
from whoqa.core.metrics import paired_book_bootstrap
from whoqa.core.store import load_questions
from whoqa.core.words import answer_tokens
from whoqa.core.workspace import Workspace
from whoqa.retrieval.bm25f import RetrievalConfig, windows
from whoqa.retrieval.lucene import analyzer
from whoqa.retrieval.openbook import open_book
from whoqa.retrieval.passages import DenseIndex, PassageConfig, encode

from pool_recall import KS, THRESHOLD, first_bearing, fused  # (this folder's: the served pool fusion's last
#                                                               step, the recall criterion)

HERE = Path(__file__).parent
LIGHT_VERBS = {"be", "do", "have", "get", "make", "happen", "take", "go", "say", "call", "name"}
OBJECTS = {"dobj", "pobj", "attr", "nsubj", "nsubjpass", "oprd", "dative", "obj", "iobj"}
ARMS = {"served (pool)": None, "event verbs x2": ("verbs", 2.0), "event verbs and objects x2": ("all", 2.0),
        "event verbs and objects x3": ("all", 3.0)}


def event_words(question: str) -> tuple[list[str], list[str]]:
    """(the question's event verbs, their objects' nouns): content verbs (not be/do/have and the like) and the common
    nouns that are their subjects or objects, or objects of their prepositions."""
    doc = load_nlp()(question)
    verbs = [t for t in doc if t.pos_ == "VERB" and t.lemma_.lower() not in LIGHT_VERBS]
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is not None and root.pos_ == "NOUN" and any(c.dep_ == "aux" for c in root.children):
        verbs.append(root)  # "Why does the portrait change?": the small parser's noun with an auxiliary is the verb
    heads = set(verbs) | {t for v in verbs for t in v.children if t.dep_ == "prep"}
    objects = [t for t in doc if t.pos_ == "NOUN" and t not in verbs and (t.dep_ in OBJECTS or t.dep_ == "compound")
               and (t.head in heads or not verbs)]
    return [t.text for t in verbs], [t.text for t in objects]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--books", type=int, default=41)
    ap.add_argument("--out", type=Path, default=HERE)
    a = ap.parse_args()
    ws = Workspace(a.workspace)
    by_book = load_questions(ws)
    books = sorted(b for b in by_book if (ws.books / b).is_dir())[:a.books]
    cfg, rcfg = PassageConfig(), RetrievalConfig()
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
            verbs, objects = event_words(q["question"])
            golds = [answer_tokens(q["answer1"]), answer_tokens(q["answer2"])]
            qvec = encode([query.text])[0]
            row = {"book": b, "question_id": q["question_id"], "verbs": verbs, "objects": objects, "rank": {}}
            for arm, how in ARMS.items():
                boosts = None
                if how:
                    chosen = verbs if how[0] == "verbs" else verbs + objects
                    boosts = {t: how[1] for t in analyzer().analyze(" ".join(chosen))}
                ranked = ob.index.search(query.content, query.characters, rcfg.pool, boosts) or \
                    ob.index.search(query.words, query.characters, rcfg.pool, boosts)
                pool = [s for s, _ in ranked[:cfg.pool_sentences]]
                wins = []
                if pool:
                    scores = dense.vectors[pool] @ qvec  # (pool,)
                    wins = windows(fused(ranked, pool, scores, cfg), rcfg.context_sentences, len(book.sentences),
                                   rcfg.window)
                row["rank"][arm] = first_bearing(book, wins, golds, texts)
            rows.append(row)
        print(f"{b}: {sum(1 for r in rows if r['book'] == b)} questions, {time.perf_counter() - t0:.0f}s", flush=True)
    keys = [f"recall@{k}" for k in KS]
    arms = list(ARMS)

    def hits(arm):
        return [[100.0 * (r["rank"][arm] is not None and r["rank"][arm] <= k) for k in KS] for r in rows]
    table = {arm: dict(zip(keys, (round(float(np.mean(c)), 1) for c in np.array(hits(arm)).T))) for arm in arms}
    paired = {arm: paired_book_bootstrap(hits(arm), hits(arms[0]), [r["book"] for r in rows], keys)["difference"]
              for arm in arms[1:]}
    summary = {"criterion": f"a window with a span of ROUGE-L >= {THRESHOLD} against a gold answer",
               "books": len(books), "questions": len(rows),
               "with an event word": sum(bool(r["verbs"] or r["objects"]) for r in rows),
               "recall": table, f"minus {arms[0]}, resampled by book": paired,
               "seconds": round(time.perf_counter() - t0, 1)}
    (a.out / "event_recall.json").write_text(json.dumps(summary, indent=1) + "\n")
    with gzip.open(a.out / "event_recall.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps(summary["recall"], indent=1))


if __name__ == "__main__":
    main()
