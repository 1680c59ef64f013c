"""A prepared book opened for questions: the book, its characters' names, its BM25F index and its sentence vectors,
cut where a reader asked for no spoilers. Opened once per book (the service keeps a few); everything that answers a
question reads the book through it."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.aliases import AliasIndex
from whoqa.core.book import Book, is_done
from whoqa.core.query import Query
from whoqa.core.workspace import ReadOnly, Workspace
from whoqa.retrieval.bm25f import (BM25FIndex, CutIndex, DamagedIndex, NothingMatched, RetrievalConfig, Window,
                                   matches_question, question_windows)
from whoqa.retrieval.passages import DenseIndex, PassageConfig, PoolVectors, passage_windows

log = logging.getLogger(__name__)


@dataclass
class OpenBook:
    book: Book
    aliases: AliasIndex
    index: BM25FIndex | CutIndex
    vectors: Path | None = None  # where its sentence vectors are kept (made the first time they are read)
    cut: dict | None = None  # {"spec", "sentences", "of"}: read up to a point (`upto`), as Answer.upto records it
    device: str | None = None  # where its sentence vectors are encoded
    _dense: DenseIndex | None = field(default=None, repr=False)
    _pool: PoolVectors | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return self.book.id

    def query(self, question: str | Query) -> Query:
        """The question read in this book (its names resolved against this book's characters); a Query read in it
        already is itself."""
        if isinstance(question, Query):
            return question if question.spans is not None else question.about(self.aliases)
        return Query.read(question).about(self.aliases)

    def read(self, question: str | Query) -> Query:
        """The question read in this book, where the book holds something to answer it from: NothingMatched where no
        sentence matches a content word of it or a character it names (before any model is asked)."""
        query = self.query(question)
        if not self.matches(query):
            raise NothingMatched(f"nothing in book {self.id} matches the question's words, so there is nothing to "
                                 f"answer from: ask with words (or character names) the book uses")
        return query

    def matches(self, query: Query) -> bool:
        """Whether any sentence matches a content word (or a named character) of the question."""
        return matches_question(self.index, query)

    def windows(self, query: Query, rcfg: RetrievalConfig | None = None) -> list[Window]:
        """The question's BM25F windows: the recipe of the stored contexts the Who models trained on."""
        return question_windows(self.index, query, len(self.book.sentences), rcfg or RetrievalConfig())

    def passages(self, query: Query, cfg: PassageConfig) -> list[Window]:
        """An other question's windows, by `cfg` (whoqa.retrieval.passages): with the sentence vectors where it fuses
        them."""
        if cfg.fusion == "pool":
            self._pool = self._pool or PoolVectors(self.book, self.device)
        dense = self.dense() if cfg.whole_book else self._pool if cfg.fusion == "pool" else None
        return passage_windows(self.book, self.index, query, cfg, dense)

    @property
    def vectors_read(self) -> bool:
        return self._dense is not None

    def dense(self) -> DenseIndex:
        """The book's sentence vectors, read (or encoded) once."""
        if self._dense is None:
            if self.vectors is None:
                raise ValueError(f"book {self.id} was opened without a place for its sentence vectors")
            self._dense = DenseIndex(self.book, self.vectors, self.device)
        return self._dense

    def upto(self, spec: str) -> OpenBook:
        """The book as far as a reader has read: `spec` a share ("40%") or a chapter heading ("Chapter 12";
        whoqa.core.book.Book.cut). The cut book has only its first sentences, the characters mentioned there and an
        index that finds nothing after them, so its passages, candidates, their features and the evidence all come
        from the text before the cut."""
        n, total = self.book.cut(spec), len(self.book.sentences)
        cut = self.book.upto(n)
        return OpenBook(cut, AliasIndex(cut.characters), CutIndex(self.index, n, total), self.vectors,
                        {"spec": spec, "sentences": n, "of": total}, self.device)


def open_book(workspace: Path, book_id: str, rcfg: RetrievalConfig | None = None, device: str | None = None) -> OpenBook:
    """A prepared book, opened; its index is built the first time."""
    ws = Workspace(workspace)
    folder = ws.books / book_id
    if not is_done(folder, book_id):
        raise FileNotFoundError(f"book {book_id} is not prepared in {workspace}: run `whoqa prepare "
                                f"--workspace {workspace} --book {book_id}` first (or ask with --text FILE)")
    book = Book.load(folder, book_id)
    index, rcfg = ws.book_index(book_id), rcfg or RetrievalConfig()
    fix = (f"run `whoqa index --workspace {workspace}` where it is writable (it is served read-only here, so the "
           f"index is not built)")
    if ws.read_only and not any(Path(index).glob("segments_*")):
        raise ReadOnly(f"book {book_id} has no BM25F index ({index}): {fix}")
    BM25FIndex.ensure(book, index)
    try:
        searcher = BM25FIndex(index, rcfg)
    except DamagedIndex as e:  # Lucene's own words for damaged files: derived from the book, so it is rebuilt
        if ws.read_only:
            raise ReadOnly(f"book {book_id}'s BM25F index {index} is damaged ({e}): {fix}") from None
        log.warning("BM25F index %s is damaged (%s): rebuilt", index, e)
        BM25FIndex.build(book, Path(index), replace=True)  # (the damaged one is replaced once the new one is whole)
        searcher = BM25FIndex(index, rcfg)
    return OpenBook(book, AliasIndex(book.characters), searcher, ws.book_vectors(book_id), device=device)
