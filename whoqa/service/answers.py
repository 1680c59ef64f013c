"""The service: a workspace's books and models, loaded once per process, and `answer`, the one path to an answer:
the question read once (a `Query`), its route from the routing table, the book opened once (an `OpenBook`), then the
route's scorer (whoqa.service.scorers) gives the Answer."""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from whoqa.core.progress import Stages
from whoqa.core.query import Query
from whoqa.core.workspace import Workspace
from whoqa.retrieval.bm25f import Window
from whoqa.retrieval.openbook import OpenBook
from whoqa.retrieval.passages import PassageConfig
from whoqa.service.intake import Books
from whoqa.service.models import Models
from whoqa.service.routing import Route
from whoqa.service.schema import Answer, ServiceConfig
from whoqa.service.reading import written_answer
from whoqa.service.scorers import SCORERS

log = logging.getLogger(__name__)
WARM_QUESTIONS = ("Who is the hero?", "What happens at the end?")  # a Who question and another: their routes' LLMs


class Service:
    """A workspace's books and models, loaded once per process; `answer` is the one path to an answer."""

    def __init__(self, workspace: str | Path, cfg: ServiceConfig | None = None, fits_from: str | Path | None = None,
                 stages: Stages | None = None):
        """fits_from: the workspace whose feature-ranker fit and questions serve (default: this one; `eval --data`
        serves another folder's books with the training workspace's fit, as `ask` would). stages: what a long answer
        is doing, said as it goes (default silent; the CLI shows them on a terminal: Stages(on=True))."""
        self.ws = Workspace(workspace)
        self.cfg = cfg or ServiceConfig()
        self.stages = stages or Stages()
        self.models = Models(self.ws, Workspace(fits_from or workspace), self.cfg, self.stages)
        self.lock = threading.RLock()  # the models and the open books, one caller at a time
        self.books = Books(self.ws, self.cfg, self.models, self.lock, self.stages)

    # the books' half, as a caller names it (whoqa.service.intake.Books)
    def intake(self, text: str | Path | None = None, data: str | Path | None = None, book: str | None = None) -> str:
        return self.books.intake(text, data, book)

    def resolve(self, book: str | Path) -> str:
        return self.books.resolve(book)

    def open(self, book_id: str, upto: str | None = None) -> OpenBook:
        return self.books.open(book_id, upto)

    def book(self, book_id: str):
        return self.books.open(book_id).book

    def vectors_later(self, book_id: str) -> None:
        self.books.vectors_later(book_id)

    def passages(self, ob: OpenBook, query: Query, cfg: PassageConfig | None = None) -> list[Window]:
        return self.books.passages(ob, query, cfg)

    def warm(self) -> threading.Thread:
        """Begin loading, in the background, the LLMs a first question reads (a Who question's and another's, on a
        book no network trained on: the Q4_0 weights made where they are missing), so that the first answer waits
        for no model: a process that lives on calls it when it starts and once a book is in (`serve`). A model
        already loaded or loading is not loaded again; one that cannot load says so at the question that needs it.
        Returns the thread that begins the loads (the loads themselves run in the models' loader). Transformers is
        imported here first, in the caller's thread: its lazy modules, first imported by two threads at once (a load
        and an upload's sentence encoder), fail with "partially initialized module"."""
        from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer  # noqa: F401  (see above)
        if self.cfg.passages.fusion != "bm25f":  # the passages' sentence encoder, here too (it patches torch as it
            from whoqa.core.minilm import bundled_minilm  # loads: no other thread's tensors may meet that)
            from whoqa.retrieval.passages import _encoder
            _encoder(bundled_minilm("use PassageConfig.fusion 'bm25f'"), self.models.device())

        def begin():
            with self.lock:
                for question in WARM_QUESTIONS:
                    try:
                        self.models.prefetch(False, self.models.routes().route("", Query.ask(question)))
                    except Exception as e:  # (the question that needs it raises it in line)
                        log.info("not loaded ahead of a question (%s): %s", question, e)
        thread = threading.Thread(target=begin, name="whoqa-warm", daemon=True)
        thread.start()
        return thread

    def route(self, book_id: str, question: str | Query, forced: str = "auto", upto: str | None = None) -> Route:
        """The route, by the measurements of the workspace whose models serve (`fits_from`'s, for `eval --data`)."""
        return self.models.routes().route(book_id, Query.ask(question), forced, upto)

    def answer(self, book_id: str, question: str | Query, route: str = "auto", upto: str | None = None) -> Answer:
        """The answer by the chosen route; with `upto` ("40%", "Chapter 12"), from the text before that point only.
        A question no sentence matches (by a content word or a named character; before the cut with `upto`) gets no
        answer from any route, before a model loads: NothingMatched (OpenBook.read). (An answer from passages that
        match stands only where they hold it: `evidence.grounded`.)"""
        query = Query.ask(question)
        self.cfg.check()
        t0 = time.perf_counter()
        with self.lock:
            try:
                chosen = self.models.routes().route(book_id, query, route, upto)
                self.models.prefetch(book_id in self.books.opened, chosen)
                ob = self.open(book_id, upto)
                query = ob.read(query)
                self.stages.stage("answering")
                ans = SCORERS[chosen.name](self, ob, query, chosen)
            finally:
                self.models.settle()
                self.stages.done()
        ans.route, ans.reason, ans.upto = chosen.name, chosen.reason, ob.cut if upto else None
        ans.seconds = round(time.perf_counter() - t0, 4)
        return ans

    def written(self, book_id: str, question: str | Query, upto: str | None = None, again: bool = False):
        """A Who question answered as the reader of other questions writes answers, linked to the book's cast
        (whoqa.ranker.written): (Written, the reader's Answer); `again`: asked once more where it wrote only the
        question's own person (whoqa.service.reading.write_again)."""
        with self.lock:
            ob = self.open(book_id, upto)
            return written_answer(self, ob, ob.query(question), again=again)
