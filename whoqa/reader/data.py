"""The reader's examples (FiD's JSON data contract, see whoqa.reader) and their batches.

A question's passages are the top-k windows of one ranker's contexts, as text; "none" gives no passage (the
no-context reader sees the question alone) and "oracle" the windows BM25F finds with the question and its answers.
"""
from __future__ import annotations

import json
import logging
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from whoqa.core.registry import check_name
from whoqa.core.artifacts import read_cache
from whoqa.core.book import Book, detokenize, window_text
from whoqa.core.files import atomic_write
from whoqa.core.folds import book_folds as by_book
from whoqa.core.progress import bar as progress_bar
from whoqa.core.query import Query
from whoqa.core.store import load_questions
from whoqa.core.workspace import Workspace
from whoqa.retrieval.bm25f import Window
from whoqa.retrieval.contexts import load_contexts
from whoqa.retrieval.openbook import OpenBook

log = logging.getLogger(__name__)
CONTEXTS = ("none", "bm25f", "bert", "oracle")
EXAMPLES_VERSION = 2  # 2: passages carry their place in the book (starts)


@dataclass
class ReaderExample:
    question_id: int
    document_id: str
    question: str
    answers: list[str]
    passages: list[str]
    starts: list[int] = field(default_factory=list)  # each passage's first sentence (its place in the book)


def bm25f_passages(ob: OpenBook, query: Query, top_k: int, starts: bool = False, wins: list[Window] | None = None):
    """A new question's top-k BM25F windows of an opened book, as text, best first: the passages `ask` gives a reader,
    cut from the windows the index stage stores for training (`OpenBook.windows`, or `wins` when the caller has
    them); with starts, also each one's first sentence."""
    spans = (ob.windows(query) if wins is None else wins)[:top_k]
    texts = [window_text(ob.book, w.first, w.last) for w in spans]
    return (texts, [w.first for w in spans]) if starts else texts


def examples_path(workspace: Path, context: str) -> Path:
    return Workspace(workspace).reader_examples(context)


def build_examples(workspace: Path, context: str, top_k: int = 10, progress: bool = True) -> list[ReaderExample]:
    """Every question of WS/questions.json with its top-k passages; written once to WS/reader/examples/ (the file is
    reused while it holds at least top_k passages per question). Books whose contexts are missing are skipped."""
    check_name("reader context", context, CONTEXTS)
    ws = Workspace(workspace)
    path = examples_path(ws, context)
    data = read_cache(path, dict)  # a cache: missing, damaged or too short, it is made again below
    if data is not None:
        if data.get("top_k", 0) >= top_k and data.get("version") == EXAMPLES_VERSION:
            return [ReaderExample(**{**e, "passages": e["passages"][:top_k], "starts": e["starts"][:top_k]})
                    for e in data["examples"]]
    out: list[ReaderExample] = []
    missing = []
    by_book = load_questions(ws)
    for book_id, qs in progress_bar(sorted(by_book.items()), desc=f"reader examples [{context}]", unit="book",
                                    progress=progress):
        ctx = None
        if context != "none":
            ctx = load_contexts(ws, context, book_id)
            if ctx is None:
                missing.append(book_id)
                continue
            book = Book.load(ws.books / book_id, book_id)
        for q in qs:
            spans = [] if ctx is None else ctx.get(str(q["question_id"]), [])[:top_k]
            passages = [window_text(book, w.first, w.last) for w in spans]
            out.append(ReaderExample(q["question_id"], book_id, q["question"], [q["answer1"], q["answer2"]],
                                     passages, [w.first for w in spans]))
    if missing:
        hint = "whoqa index --ranker oracle" if context == "oracle" else f"whoqa index --ranker {context}"
        log.warning("%d book(s) have no %s contexts and are left out of the reader's examples; run `%s`",
                    len(missing), context, hint)
    if not out:
        raise FileNotFoundError(f"no {context} contexts under {ws}/contexts/{context}: run `whoqa index --workspace "
                                f"{ws} --ranker {context}` first")
    atomic_write(path, json.dumps({"context": context, "top_k": top_k, "version": EXAMPLES_VERSION, "missing_books": missing,
                                   "examples": [e.__dict__ for e in out]}))
    return out


class Batcher:
    """Tokenises examples into FiD batches: all passages packed as (P, L) with per-example counts, labels (B, A)."""

    def __init__(self, tokenizer, passage_tokens: int = 192, answer_tokens: int = 32, strip_start: int | None = None,
                 question_passage: bool = False):
        self.tok, self.passage_tokens, self.answer_tokens = tokenizer, passage_tokens, answer_tokens
        self.strip_start = strip_start  # bert2bert: the decoder start token ([CLS]) is not part of the labels
        # one more "passage" of the question alone before the passages: the reader then sees everything the
        # no-context reader sees, so its passages can only add to it
        self.question_passage = question_passage

    def inputs(self, examples: list[ReaderExample]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """-> input_ids (P, L), attention_mask (P, L), counts (B,): "question [SEP] passage" per passage (the
        question alone when an example has no passage, and first when question_passage)."""
        firsts, seconds, counts = [], [], []
        for e in examples:
            ps = ([""] if self.question_passage and e.passages else []) + (e.passages or [None])
            firsts += [e.question] * len(ps)
            seconds += ps
            counts.append(len(ps))
        if all(s is None for s in seconds):
            enc = self.tok(firsts, truncation=True, max_length=self.passage_tokens, padding=True, return_tensors="pt")
        else:
            enc = self.tok(firsts, [s or "" for s in seconds], truncation=True, max_length=self.passage_tokens,
                           padding=True, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"], counts

    def labels(self, answers: list[str]) -> torch.Tensor:
        """-> (B, A) token ids of the answers, -100 at padding."""
        rows = [self.target_ids(a, self.answer_tokens) for a in answers]
        return pad_labels(rows)

    def target_ids(self, text: str, max_tokens: int) -> list[int]:
        ids = self.tok(text_target=text, truncation=True, max_length=max_tokens + 1)["input_ids"]
        if self.strip_start is not None and ids and ids[0] == self.strip_start:
            ids = ids[1:]
        return ids[:max_tokens]


def pad_labels(rows: list[list[int]]) -> torch.Tensor:
    longest = max(1, max(len(r) for r in rows))
    out = torch.full((len(rows), longest), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def book_folds(examples: list[ReaderExample], folds: int, seed: int) -> list[list[str]]:
    return by_book(sorted({e.document_id for e in examples}), folds, seed)


def sample_passages(workspace: Path, book_ids: list[str], n: int, words: int, seed: int,
                    progress: bool = True) -> list[str]:
    """n passages of about `words` words (whole sentences from a random start), spread over the books in proportion
    to their length."""
    rng = random.Random(seed)
    books = []
    for b in progress_bar(book_ids, desc="preread books", unit="book", progress=progress):
        try:
            book = Book.load(Workspace(workspace).books / b, b)
        except Exception as e:  # one broken book is skipped, not fatal
            log.warning("prereading skips %s: %s", b, e)
            continue
        if len(book.sentences) > 5:
            books.append(book)
    if not books:
        raise FileNotFoundError(f"no prepared books to preread under {workspace}/books: run `whoqa prepare` first")
    sizes = np.array([len(b.tokens) for b in books], dtype=float)
    picks = np.random.default_rng(seed).choice(len(books), size=n, p=sizes / sizes.sum())
    out = []
    for i in picks:
        book = books[i]
        s = rng.randrange(len(book.sentences))
        ws_: list[str] = []
        while s < len(book.sentences) and len(ws_) < words:
            ws_ += book.sentence_words(s)
            s += 1
        out.append(detokenize(ws_))
    return out
