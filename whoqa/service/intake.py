"""A service's books: a book file, a NarrativeQA folder's book or a prepared id taken in, opened once and kept (the few
most recent), and cut where a reader asked for no spoilers."""
from __future__ import annotations

from pathlib import Path

KEEP_BOOKS = 4  # books kept open (a workspace may hold hundreds)


def book_stages():
    """data_prep's intake of a book (the stages the service runs: preparing a book, folding it into the word vectors),
    imported when first needed."""
    from data_prep import addbook
    return addbook


class BookIntake:
    """The books half of whoqa.service.Service (its ws, lock, stages, _opened and _cuts)."""

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
            self._opened.pop(book_id, None)  # (re)made: read afresh
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
        raise FileNotFoundError(f"{book} is neither a book file (.txt, .epub, .html) nor the id of a book in {self.ws} "
                                f"({len(ids)} book(s) there)")

    def opened(self, book_id: str) -> tuple:
        """(Book, AliasIndex, BM25FIndex) of a prepared book, read once and kept (the few most recent)."""
        from whoqa.retrieval.bm25f import RetrievalConfig, open_book
        with self.lock:
            if book_id in self._opened:
                self._opened.move_to_end(book_id)
            else:
                if len(self._opened) >= KEEP_BOOKS:
                    self._opened.popitem(last=False)
                self.stages.stage("opening the book and its index of passages")
                self._opened[book_id] = open_book(self.ws, book_id, RetrievalConfig())
            return self._opened[book_id]

    def book(self, book_id: str):
        return self.opened(book_id)[0]

    def upto(self, book_id: str, upto: str | None) -> tuple[tuple, dict | None]:
        """(the opened book as far as a reader has read, the cut as Answer.upto records it): `upto` is a share
        ("40%") or a chapter heading ("Chapter 12"; whoqa.core.book.Book.cut); None, the whole book. The cut book
        has only its first sentences, the characters mentioned there and an index that finds nothing after them, so
        its passages, candidates, their features and the evidence all come from the text before the cut."""
        from whoqa.core.aliases import AliasIndex
        from whoqa.retrieval.bm25f import CutIndex
        opened = self.opened(book_id)
        if not upto:
            return opened, None
        book, _, index = opened
        n, total = book.cut(upto), len(book.sentences)
        with self.lock:
            if (book_id, n) not in self._cuts:
                if len(self._cuts) >= KEEP_BOOKS:
                    self._cuts.pop(next(iter(self._cuts)))
                cut = book.upto(n)
                self._cuts[(book_id, n)] = (cut, AliasIndex(cut.characters), CutIndex(index, n, total))
            return self._cuts[(book_id, n)], {"spec": upto, "sentences": n, "of": total}
