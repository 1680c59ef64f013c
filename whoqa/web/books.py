"""What the API does, without HTTP: one workspace's books, their cast, uploads (whoqa.web.uploads) and answers
(whoqa.service, drawn for the page by whoqa.answer_view)."""
from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from whoqa.core.store import load_texts, redo_book
from whoqa.answer_view import as_html, for_page, sentence_segments
from whoqa.core.artifacts import problem, read_cache
from whoqa.core.book import Book, BookFormatError, is_done, token_summary
from whoqa.core.files import atomic_write
from whoqa.core.jobs import process_identity
from whoqa.core.workspace import ReadOnly, Workspace, serve_read_only
from whoqa.service import Service as Answers, ServiceConfig
from whoqa.web.config import ServeConfig
from whoqa.web.errors import ApiError
from whoqa.web.uploads import BOOK_ID, Uploads

log = logging.getLogger(__name__)


class Library(Uploads):
    """What the API does, without HTTP: books, the cast, jobs and answers of one workspace."""

    def __init__(self, cfg: ServeConfig):
        from dataclasses import replace
        from whoqa.core.workspace import default_home
        cfg = self.cfg = cfg if cfg.workspace else replace(cfg, workspace=str(default_home()))  # where `ask` keeps books
        if cfg.read_only:
            serve_read_only(cfg.workspace)
        self.ws = Workspace(cfg.workspace)
        self.jobs_dir = self.ws.jobs
        self.uploads = self.ws.uploads
        self.answers = Answers(self.ws, ServiceConfig(device=cfg.device, llm=cfg.llm))
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whoqa-upload")
        self.owner = process_identity()  # recorded with each job this server processes
        if not cfg.read_only:
            self.recover()
        self.warming = self.answers.warm() if cfg.warm else None  # (while the page opens and a book goes in)

    # --- books -------------------------------------------------------------------------------------------------
    def book_id(self, book_id: str) -> str:
        if not BOOK_ID.match(book_id or ""):
            raise ApiError(400, f"{book_id!r} is not a book id (40 hex digits)")
        if not is_done(self.ws.books / book_id, book_id):
            raise ApiError(404, f"book {book_id} is not in this workspace")
        return book_id

    def book(self, book_id: str) -> Book:
        """A book, read once by the answering service (which keeps the few most recent). Served read-only, a book
        without its index is still read for its cast (answers need the index, and say so)."""
        book_id = self.book_id(book_id)
        try:
            return self.answers.book(book_id)
        except ReadOnly:
            return Book.load(self.ws.books / book_id, book_id)

    def summary(self, book_id: str) -> dict:
        """Title, words, sentences and people (its cast) of a book, read once and kept beside it
        (WS/books/<id>/summary.json, remade when the book's files change)."""
        book_id = self.book_id(book_id)
        tokens, chars = self.ws.book_file(book_id, ".tokens"), self.ws.book_file(book_id, ".book")
        stamp = [tokens.stat().st_mtime_ns, tokens.stat().st_size, chars.stat().st_mtime_ns]
        path = self.ws.page_summary(book_id)
        saved = read_cache(path, dict)  # no cache yet, or a damaged one: made again below
        if saved and saved.get("stamp") == stamp and saved.get("counts") == "cast" and "summary" in saved:
            return saved["summary"]
        try:
            words, sentences, first = token_summary(tokens)
        except (UnicodeDecodeError, ValueError) as e:  # the book's own file is damaged: named, this book alone
            raise BookFormatError(f"{tokens}: {problem(e)}: {redo_book(tokens.parent)}") from None
        texts = load_texts(self.ws)
        kept = texts.get(book_id) or {}  # (a book added before titles were kept: its first line)
        title = kept.get("title") or kept.get("first_line") or " ".join(first) or book_id[:12]
        out = {"id": book_id, "title": title, "words": words, "sentences": sentences,
               "characters": len(self.characters(book_id))}  # the people of its cast, as its page lists them
        if not self.cfg.read_only:  # (served read-only: computed again next time, never written)
            try:
                atomic_write(path, json.dumps({"stamp": stamp, "counts": "cast", "summary": out}))
            except OSError:  # a workspace on a read-only disk: computed again next time
                pass
        return out

    def books(self) -> list[dict]:
        """Every prepared book's summary; a book whose files are damaged is listed with its one-line error
        ("damaged"), so one bad book never hides the others."""
        ids = sorted(p.name for p in self.ws.books.iterdir() if BOOK_ID.match(p.name) and is_done(p, p.name)) \
            if self.ws.books.is_dir() else []
        out = []
        for b in ids:
            try:
                out.append(self.summary(b))
            except (ValueError, OSError) as e:
                line = str(e).splitlines()[0] if str(e) else type(e).__name__
                log.warning("book %s: %s", b, line)
                out.append({"id": b, "title": b[:12], "words": 0, "sentences": 0, "characters": 0, "damaged": line})
        return out

    def read(self, book_id: str, upto: str | None = None) -> Book:
        """The book as far as the reader has read it: before `upto` ("40%", "Chapter 12": Book.cut, as `ask` cuts
        it, so a bad one is ask's one-line ValueError), the whole book without. The cut book is ask's own (kept by
        the answering service), so the page's cast and its answers know the same characters; served read-only
        without an index, the book is cut here."""
        if not upto:
            return self.book(book_id)
        book_id = self.book_id(book_id)
        try:
            return self.answers.open(book_id, upto).book
        except ReadOnly:
            book = Book.load(self.ws.books / book_id, book_id)
            return book.upto(book.cut(upto))

    def characters(self, book_id: str, upto: str | None = None) -> list[dict]:
        """The book's cast (whoqa.ranker.cast): its people, each once (a person's name clusters merged), most
        mentioned first, with how their mentions spread over the book's tenths. With `upto`, the cast of the part
        read (no spoilers): only who appears before the cut, named and counted as the text there has them, spread
        over the tenths of that part."""
        from whoqa.ranker.cast import cast_of
        book = self.read(book_id, upto)
        cast = cast_of(book)
        n = max(1, len(book.tokens))
        tenths: dict[int, list[int]] = {r: [0] * 10 for r in cast.groups}
        for m in book.mentions:
            r = cast.of(m.char_id)
            if r is not None:
                tenths[r][min(9, 10 * m.start // n)] += 1
        people = []
        for r, members in cast.groups.items():
            aliases = list(dict.fromkeys(a for c in members for a in book.characters[c].aliases))
            people.append({"id": r, "name": cast.names[r], "aliases": aliases, "gender": cast.genders[r],
                           "mentions": sum(book.characters[c].count for c in members), "per_tenth": tenths[r]})
        return sorted(people, key=lambda c: -c["mentions"])

    def character(self, book_id: str, char_id: int, limit: int = 40, upto: str | None = None) -> dict:
        """One person of the cast and the sentences that mention them; with `upto`, of the part read only (one who
        appears after the cut is not in its cast: 404)."""
        from whoqa.ranker.cast import cast_of
        book = self.read(book_id, upto)
        c = next((x for x in self.characters(book_id, upto) if x["id"] == char_id), None)
        if c is None:
            raise ApiError(404, f"book {book_id} has no character {char_id} in its cast"
                                + (f" up to {upto}" if upto else ""))
        person = cast_of(book).of
        sids = sorted({book.tokens[m.start].sentence for m in book.mentions if person(m.char_id) == char_id})
        return {**c, "sentences_with_mentions": len(sids),
                "contexts": [{"sentence": s, "segments": sentence_segments(book, s)} for s in sids[:limit]]}

    def cut(self, book_id: str, upto: str | None) -> dict | None:
        """Where the page's cast is cut, as ask's Answer.upto records it ({"spec", "sentences", "of"}), for the
        page's "as of ..." note; None without `upto`."""
        if not upto:
            return None
        whole, part = self.book(book_id), self.read(book_id, upto)
        return {"spec": upto, "sentences": len(part.sentences), "of": len(whole.sentences)}

    # --- answers -----------------------------------------------------------------------------------------------
    def progress(self) -> dict:
        """What the service is doing now (whoqa.core.progress.Stages.now: the stage, a percent where known), for the
        page to show while an answer or an upload is under way; {"stage": None} when idle."""
        return self.answers.stages.now() or {"stage": None}

    def ask(self, book_id: str, question: str, route: str = "auto", upto: str | None = None,
            html: bool = False) -> dict:
        """`whoqa ask`'s answer (whoqa.service: the same route, the same JSON), each evidence sentence with its
        text segments for highlighting (whoqa.answer_view.for_page); with html, also drawn as the page shows it."""
        ans = self.answers.answer(self.book_id(book_id), question, route, upto or None)
        doc = for_page(ans, self.book(book_id))
        return {**doc, "html": as_html(doc, book_id)} if html else doc
