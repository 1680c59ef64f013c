"""The service: a workspace's books and models, loaded once per process, and `answer`, the one path to an answer:
the question read once (a `Query`), its route from the routing table, the book opened once (an `OpenBook`), the
answer from the route's model, grounded or with its evidence."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import asdict
from pathlib import Path

from whoqa.core.progress import Stages
from whoqa.core.query import Query
from whoqa.core.workspace import Workspace
from whoqa.reader.config import LLMConfig, model_name
from whoqa.retrieval.bm25f import NothingMatched, context_sentences
from whoqa.retrieval.openbook import OpenBook
from whoqa.service.evidence import evidence_for, grounded, who_reasons, written_evidence, written_reasons
from whoqa.service.intake import BookIntake
from whoqa.service.models import Models
from whoqa.service.routing import Route, measured_rouge
from whoqa.service.schema import Answer, Evidence, Ranked, ServiceConfig, check_request, one_per_name


class Service(BookIntake):
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
        self._opened: OrderedDict[str, OpenBook] = OrderedDict()
        self._cuts: dict[tuple[str, str], OpenBook] = {}
        self._encoding: dict[str, object] = {}  # book id -> Future of its sentence vectors, encoded in the background
        self._encoder = None

    def route(self, book_id: str, question: str | Query, forced: str = "auto") -> Route:
        """The route, by the measurements of the workspace whose models serve (`fits_from`'s, for `eval --data`)."""
        query = question if isinstance(question, Query) else Query.read(question)
        return self.models.routes().route(book_id, query, forced)

    def answer(self, book_id: str, question: str | Query, route: str = "auto", upto: str | None = None) -> Answer:
        """The answer by the chosen route; with `upto` ("40%", "Chapter 12"), from the text before that point only.
        A question no sentence matches (by a content word or a named character; before the cut with `upto`) gets no
        answer from any route, before a model loads: NothingMatched. (An answer from passages that match stands only
        where they hold it: `evidence.grounded`.)"""
        query = check_request(question, route, self.cfg)
        t0 = time.perf_counter()
        with self.lock:
            try:
                chosen = self.route(book_id, query, route)
                self.models.prefetch(book_id in self._opened, chosen)
                ob = self.open(book_id, upto)
                if upto and chosen.name == "network":  # its memory arrays hold the whole book
                    if route == "network":
                        raise ValueError("--route network reads the whole book: with --upto, use the feature ranker "
                                         "(--route features or auto)")
                    chosen = Route("features", "the memory network reads the whole book, and only the text up to "
                                               f"{upto} may be read")
                query = ob.query(query)
                if not ob.matches(query):  # no answer from nothing, by any route
                    raise NothingMatched(f"nothing in book {book_id} matches the question's words, so there is "
                                         f"nothing to answer from: ask with words (or character names) the book uses")
                self.stages.stage("answering")
                if chosen.name == "reader":
                    ans = self._reader_answer(ob, query, chosen.model)
                elif chosen.name == "llm":
                    ans = self._llm_answer(ob, query, chosen.options)
                elif chosen.name == "network":
                    ans = self._network_answer(ob, query)
                else:
                    ans = self._features_answer(ob, query)
            finally:
                self.models.settle()
                self.stages.done()
        ans.route, ans.reason, ans.upto = chosen.name, chosen.reason, ob.cut if upto else None
        ans.seconds = round(time.perf_counter() - t0, 4)
        return ans

    def written(self, book_id: str, question: str | Query, upto: str | None = None):
        """A Who question answered as the reader of other questions writes answers, linked to the book's cast
        (whoqa.ranker.written): (Written, the reader's Answer)."""
        from whoqa.ranker.written import link
        with self.lock:
            ob = self.open(book_id, upto)
            query = ob.query(question)
            wins = self._passages(ob, query)
            ans = self._llm_answer(ob, query, wins=wins)
            sentences = [s for a, b, *_ in wins[:len(ans.passages)] for s in range(int(a), int(b) + 1)]
            return link(ob.book, ob.aliases, query, ans.answer or ans.withheld, sentences), ans

    def _network_answer(self, ob: OpenBook, query: Query) -> Answer:
        from whoqa.ranker.features import CONTEXT_SENTENCES
        book, context, _ = who_context(ob, query)
        net = self.models.network()
        got = net.ask(ob.id, query, self.cfg.top, self.cfg.evidence, ob, context)
        chars = [Ranked(i, n, p) for i, (n, p) in zip(got.character_ids, got.characters)]
        attention = [Evidence(s, text, [], w) for (w, text), s in zip(got.evidence, got.evidence_sentences)]
        if net.calibration is None:
            got.warnings.append("no cross-validated run of this model's recipe measured its calibration, so no "
                                "probability is shown: run `whoqa train --folds 10` with the same options")
        evidence = evidence_for(book, context[:CONTEXT_SENTENCES], chars, query, self.cfg.evidence)
        return Answer(query.text, ob.id, "who", "network", "", f"memory network {net.model_name} "
                      f"({len(net.members)} member(s))", chars, evidence=evidence,
                      attention=attention, calibration=got.calibration, warnings=got.warnings,
                      why=["a model trained on questions about this workspace's books chose it"]
                      + who_reasons(book, context[:CONTEXT_SENTENCES], chars, query.named))

    def _features_answer(self, ob: OpenBook, query: Query) -> Answer:
        from whoqa.ranker.features import CONTEXT_SENTENCES
        from whoqa.ranker.serve import rank
        book, context, wins = who_context(ob, query)
        llm = self.models.who_llm()
        fit = self.models.fit(llm)
        reader = None
        if llm:
            base, cfg = self.models.scoring_llm(llm, fit)
            reader = self.models.llm(base, scores=True, cfg=cfg)
        written = None
        if "written" in fit.ranker.features["stage1"] or "written_any" in fit.ranker.features["stage1"]:
            written, _ = self.written(ob.id, query, ob.cut["spec"] if ob.cut else None)  # linked to the cast
        got = rank(fit.ranker, ob, query, wins, reader, self.models.pool(who=True), self.models.slots(fit),
                   written.linked if written else None)
        chars = one_per_name([Ranked(i, book.characters[i].name, p, s)
                              for i, p, s in zip(got.ids, got.probabilities, got.llm)], self.cfg.top)
        r = fit.ranker
        model = (f"feature ranker + {llm} ({reader.runtime}) reading the passages for its top {r.top_k}" if llm else
                 "feature ranker, first stage (no local LLM)")
        calibration = {"by": "maximum likelihood on other books' questions", "fit": fit.where,
                       "fit_of": f"run {fit.measured_on}" if fit.measured_on else "the 41 shared books (shipped)",
                       "questions": r.questions, "ece": r.ece, "provenance": fit.provenance,
                       "stage": "both" if got.read else "first"}
        evidence = evidence_for(book, context[:CONTEXT_SENTENCES], chars, query, self.cfg.evidence)
        why = who_reasons(book, context[:CONTEXT_SENTENCES], chars, query.named)
        if written is not None:
            evidence, why = written_evidence(book, written, chars, evidence, self.cfg.evidence), \
                written_reasons(book, written, chars) + why
        return Answer(query.text, ob.id, "who", "features", "", model, chars, evidence=evidence,
                      calibration=calibration, warnings=who_warnings(query), why=why)

    def _reader_answer(self, ob: OpenBook, query: Query, model: str | None = None) -> Answer:
        reader = self.models.fid(model)
        got = reader.ask(ob.id, query, ob)
        # what it read (the stored contexts' recipe it trained on); a reader of no passage: the book's best passages
        wins = ob.windows(query)[:len(got.passages)] if reader.passages else \
            self._passages(ob, query)[:LLMConfig.top_k]
        why = [f"a reader trained on other books' questions wrote it after reading the book's {len(got.passages)} "
               f"passage{'s' * (len(got.passages) != 1)} closest to your question"]
        return grounded(Answer(query.text, ob.id, "reader", "reader", "", f"FiD reader {reader.model_name}",
                               answer=got.answer, passages=got.passages, why=why),
                        ob.book, wins, got.answer, self.cfg.grounding, query)

    def _llm_answer(self, ob: OpenBook, query: Query, options: dict | None = None,
                    wins: list | None = None) -> Answer:
        """The installed LLM's answer, with the options of the LLM run the route measured (else LLMConfig's)."""
        from whoqa.llm.reader import answer_from_book
        llm = self.models.routes().llm
        if llm is None:
            raise FileNotFoundError("no local LLM installed: `bash install.sh` installs one")
        base, cfg = self.models.answering_llm(llm, options)
        wins = wins if wins is not None else self._passages(ob, query)
        reader, pool = self.models.llm(base, scores=False, cfg=cfg), self.models.pool(who=False)
        text, passages = answer_from_book(reader, ob, query, pool, cfg, wins)
        shown = ", ".join([f"{k} {v}" for k, v in sorted(asdict(cfg).items())
                           if getattr(LLMConfig, k) != v and k != "runtime"]
                          + [f"{min(cfg.shots, len(pool.rows))} example questions", reader.runtime]
                          + ([f"weights {model_name(base)}"] if base != llm else []))
        rouge = measured_rouge(llm)
        why = ([f"a small language model ({model_name(llm)}) wrote it after reading the book's {len(passages)} "
                f"passage{'s' * (len(passages) != 1)} closest to your question"]
               + ([f"treat it as a rough guess: on test questions its answers share about {rouge:.0f}% of "
                   f"their wording with people's answers"] if rouge is not None else []))
        return grounded(Answer(query.text, ob.id, "reader", "llm", "", f"{llm} ({shown})", answer=text,
                               passages=passages, why=why), ob.book, wins[:len(passages)], text, self.cfg.grounding,
                        query)


def who_context(ob: OpenBook, query: Query) -> tuple:
    """(the book, the question's context sentences, its BM25F windows): what every Who route reads."""
    if not ob.book.characters:
        raise ValueError(f"book {ob.id} has no characters to answer with (the engine found no person in it)")
    wins = ob.windows(query)
    return ob.book, context_sentences(wins, len(ob.book.sentences)), wins


def who_warnings(query: Query) -> list[str]:
    return [f"the question names {n!r}, who is not a character of this book" for n in query.unknown]
