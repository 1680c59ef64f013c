"""A service's books: a book file, a NarrativeQA folder's book or a prepared id taken in, opened once and kept (the few
most recent), and cut where a reader asked for no spoilers."""
from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path

from whoqa.core.query import Query
from whoqa.core.text import BOOK_FORMATS
from whoqa.retrieval.bm25f import Window
from whoqa.retrieval.openbook import OpenBook
from whoqa.retrieval.passages import PassageConfig

log = logging.getLogger(__name__)
KEEP_BOOKS = 4  # books kept open (a workspace may hold hundreds)


def book_stages():
    """data_prep's intake of a book (the stages the service runs: preparing a book, folding it into the word vectors),
    imported when first needed."""
    from data_prep import addbook
    return addbook


class Books:
    """A service's books, beside its models (whoqa.service.answers.Service holds one of each): taken in, opened once
    and kept, cut for no spoilers, their passages retrieved. `lock`: the service's (one caller at a time)."""

    def __init__(self, ws, cfg, models, lock, stages):
        self.ws, self.cfg, self.models, self.lock, self.stages = ws, cfg, models, lock, stages
        self.opened: OrderedDict[str, OpenBook] = OrderedDict()  # the few most recent, by id
        self._cuts: dict[tuple[str, str], OpenBook] = {}
        self._encoding: dict[str, object] = {}  # book id -> Future of its sentence vectors, encoded in the background
        self._encoder = None

    def intake(self, text: str | Path | None = None, data: str | Path | None = None, book: str | None = None) -> str:
        """The id of the book asked about: a plain-text file (prepared the first time), a NarrativeQA folder's book
        (prepared the first time) or a prepared book's id."""
        if (text is None) == (book is None):
            raise ValueError("name the book: --book ID (prepared, or with --data DIR) or --text FILE")
        with self.lock:
            if text is not None:
                book_id = book_stages().add_text(self.ws, Path(text), stages=self.stages)
            elif data is not None:
                book_id = book_stages().add_from_data(self.ws, Path(data), book)
            else:
                book_id = book
            self.opened.pop(book_id, None)  # (re)made: read afresh
            return book_id

    def resolve(self, book: str | Path) -> str:
        """The id of BOOK as a person names it: a book file (text, EPUB, HTML, PDF or Kindle; processed the first time, the same
        content is the same book), else a prepared book's id or a unique start of one (at least 6 characters)."""
        path = Path(book).expanduser()
        if path.is_file():
            return self.intake(text=path)
        name = str(book).strip().lower()
        ids = sorted(p.name for p in self.ws.books.iterdir() if p.is_dir()) if self.ws.books.is_dir() else []
        found = [b for b in ids if b == name] or ([b for b in ids if b.startswith(name)] if len(name) >= 6 else [])
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ValueError(f"{book!r} starts {len(found)} book ids of {self.ws}: give more of it")
        raise FileNotFoundError(f"{book} is neither a book file ({BOOK_FORMATS}) nor the id of a book in {self.ws} "
                                f"({len(ids)} book(s) there)")

    def open(self, book_id: str, upto: str | None = None) -> OpenBook:
        """A prepared book, opened once and kept (the few most recent); with `upto` ("40%", "Chapter 12"), as far as
        a reader has read (OpenBook.upto), kept as well."""
        from whoqa.retrieval.openbook import open_book
        with self.lock:
            if book_id in self.opened:
                self.opened.move_to_end(book_id)
            else:
                if len(self.opened) >= KEEP_BOOKS:
                    self.opened.popitem(last=False)
                self.stages.stage("opening the book and its index of passages")
                self.opened[book_id] = open_book(self.ws, book_id, device=self.models.device())
            if not upto:
                return self.opened[book_id]
            if (book_id, upto) not in self._cuts:
                if len(self._cuts) >= KEEP_BOOKS:
                    self._cuts.pop(next(iter(self._cuts)))
                self._cuts[(book_id, upto)] = self.opened[book_id].upto(upto)
            return self._cuts[(book_id, upto)]

    def book(self, book_id: str):
        return self.open(book_id).book

    def vectors_later(self, book_id: str) -> None:
        """Begin encoding a book's sentence vectors in a thread of their own (once per book; nothing where they are
        kept already or retrieval reads none), so the first question that is not a Who question finds them made: a
        process that lives on calls it once a book is in (`chat`, the page's upload). The encoder loads here, in the
        caller's thread: a model's loading patches torch for the process (empty weights), which no other thread's
        tensors may meet; only the encoding runs beside."""
        if not self.cfg.passages.whole_book or book_id in self._encoding or self.ws.book_vectors(book_id).is_file():
            return
        from concurrent.futures import ThreadPoolExecutor
        from whoqa.core.book import Book
        from whoqa.core.minilm import bundled_minilm
        from whoqa.retrieval.passages import DenseIndex, _encoder
        path, device = self.ws.book_vectors(book_id), self.models.device()
        _encoder(bundled_minilm("use PassageConfig.fusion 'bm25f'"), device)  # (loaded once, in this thread)
        self._encoder = self._encoder or ThreadPoolExecutor(1, thread_name_prefix="whoqa-vectors")
        self._encoding[book_id] = self._encoder.submit(
            lambda: DenseIndex(Book.load(self.ws.books / book_id, book_id), path, device))

    def passages(self, ob: OpenBook, query: Query, cfg: PassageConfig | None = None) -> list[Window]:
        """A question's passages by `cfg` (default ServiceConfig.passages; whoqa.retrieval.passages): its content words
        and characters, fused with the book's sentence vectors where so configured (those `vectors_later` began are
        waited for, their file then read; failed, they are encoded again in line, which raises its own error)."""
        cfg = cfg or self.cfg.passages
        if cfg.whole_book and ob.id in self._encoding:
            self.stages.stage("reading the book's sentences into vectors (once per book)")
            try:
                self._encoding[ob.id].result()
            except Exception as e:  # noqa: BLE001
                log.warning("encoding book %s's sentence vectors in the background failed (%s): again now", ob.id, e)
            finally:
                self._encoding.pop(ob.id, None)
        if cfg.whole_book and not ob.vectors_read:
            self.stages.stage("reading the book's sentences into vectors (once per book)")
        return ob.passages(query, cfg)
