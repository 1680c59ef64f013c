"""The anonymous-slot network's scores for a question about any book (`SlotScorer`): it needs no vectors of the
book's characters, so a book no model saw is read as it is, once, and each question costs one forward pass."""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import torch

from whoqa.core.book import Book
from whoqa.core.numerics import intra_op_threads
from whoqa.core.query import Query
from whoqa.memnet.data import question_tokens
from whoqa.memnet.slot_train import ensemble_logp, load
from whoqa.memnet.slots import SlotExample, slot_book, split_question

KEEP_BOOKS = 4  # books whose arrays stay in memory (a chat reads one)


class SlotScorer:
    """A trained slot network (a folder `slot_train.save` wrote); `scores` gives each character's log-probability."""

    def __init__(self, folder: Path, device: str = "auto", threads: int = 1):
        self.folder, self.threads = Path(folder), threads
        with intra_op_threads(threads):
            self.models, self.vocab = load(self.folder, device)
        self._books: OrderedDict = OrderedDict()

    def _arrays(self, book: Book):
        key = (book.id, len(book.sentences))  # a book cut by --upto is a book of its own
        if key not in self._books:
            if len(self._books) >= KEEP_BOOKS:
                self._books.popitem(last=False)
            self._books[key] = slot_book(book, self.vocab).with_word_sums(self.vocab.matrix)
        return self._books[key]

    def scores(self, book: Book, query: Query, context: list[int], memories: int = 100) -> dict[int, float]:
        """{character id: log-probability} for a question (read in the book) with these context sentences (best
        first)."""
        arrays = self._arrays(book)
        words, named = split_question(question_tokens(query, book.id), arrays, self.vocab)
        with intra_op_threads(self.threads), torch.no_grad():
            got = ensemble_logp(self.models, [SlotExample(book.id, words, named, list(context), [])],
                                {book.id: arrays}, memories)[0]
        return {int(c): float(v) for c, v in got.items()}

