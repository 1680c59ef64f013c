"""The service: a workspace's books and models, loaded once per process, and `answer`, the one path to an answer
(the route from the routing table, the answer from the route's model, grounded or with its evidence)."""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, replace
from pathlib import Path

from whoqa.core.names import name_spans, named_characters, unknown_names
from whoqa.core.progress import Stages
from whoqa.core.workspace import Workspace
from whoqa.ranker.config import RerankConfig
from whoqa.ranker.features import ROLE_FEATURES
from whoqa.reader.config import LLMConfig, llm_answer_options, model_name
from whoqa.reader.grounding import ground
from whoqa.reader.prompt import ShotPool
from whoqa.retrieval.bm25f import NothingMatched, matches_question
from whoqa.service.routing import Route, RoutingTable, measured_rouge, native_answers, state_key
from whoqa.service.evidence import evidence_for, who_reasons, written_evidence, written_reasons
from whoqa.service.intake import KEEP_BOOKS, BookIntake
from whoqa.service.schema import Answer, Evidence, Ranked, ServiceConfig, check_request, one_per_name


PARSER = ("question parser",)  # `_prefetch`'s warm-up of whoqa.ranker.syntax, beside the LLMs' loads
log = logging.getLogger(__name__)


class Service(BookIntake):
    """A workspace's books and models, loaded once per process; `answer` is the one path to an answer."""

    def __init__(self, workspace: str | Path, cfg: ServiceConfig | None = None, fits_from: str | Path | None = None):
        """fits_from: the workspace whose feature-ranker fit and questions serve (default: this one; `eval --data`
        serves another folder's books with the training workspace's fit, as `ask` would)."""
        self.ws = Workspace(workspace)
        self.cfg = cfg or ServiceConfig()
        self.home = Workspace(fits_from or workspace)
        self.lock = threading.RLock()  # the models and the open books, one caller at a time
        self._opened: OrderedDict[str, tuple] = OrderedDict()
        self._network = None
        self._slots = None
        self._readers: dict[str | None, object] = {}
        self._llms: dict[tuple, object] = {}
        self._loading: dict[tuple, object] = {}  # key -> Future of an LLM `_prefetch` is loading
        self._loader = None
        self._scorers: dict[tuple[str, str], str] = {}  # (LLM, weights) -> its model requantised so (`_requantised`)
        self._fits: dict[str, object] = {}
        self._warned: set[str] = set()  # fits' LLMs found missing (`who_llm`), said once
        self._pools: dict[str, ShotPool] = {}
        self._routes: RoutingTable | None = None
        self._cuts: dict[tuple[str, int], tuple] = {}
        self.stages = Stages()  # silent; the CLI shows them on a terminal (Stages(on=True))
        self._dense: OrderedDict[tuple[str, int], object] = OrderedDict()
        self._encoding: dict[str, object] = {}  # book id -> Future of its sentence vectors, encoded in the background
        self._encoder = None

    # --- models ------------------------------------------------------------------------------------------------
    def network(self):
        from whoqa.memnet.ask import Asker
        from whoqa.service.intake import book_stages
        if self._network is None:
            self.stages.stage("loading the memory network")
            self._network = Asker(self.ws, self.cfg.model, device=self.cfg.device,
                                  fold=lambda ws, ids: book_stages().fold_books(ws, ids))
        return self._network

    def slot_scorer(self, fit):
        """The slot network (WS/models/slots of the workspace whose fit serves), loaded once; None where the fit does
        not read it."""
        if "network" not in fit.ranker.features["stage1"]:
            return None
        if self._slots is None:
            from whoqa.memnet.slot_ask import SlotScorer
            from whoqa.memnet.slot_train import FINAL
            self.stages.stage("loading the memory network")
            self._slots = SlotScorer(self.home.models / FINAL, self.cfg.device)
        return self._slots

    def llm(self, base: str, scores: bool, cfg: LLMConfig | None = None):
        """A local LLM, loaded once per (model, use, prompt): for name scores the runtime `scoring_runtime` picks (one
        that gives token probabilities), for answers the one LLMConfig chooses (whoqa.reader.runtimes), with cfg's
        prompt budget, answer length and prompt form. One `_prefetch` began loading is waited for (its failure is
        raised here, as a load's own would be)."""
        key, cfg = self._llm_key(base, scores, cfg)
        if key not in self._llms:
            self.stages.stage(f"loading the language model ({model_name(base)})")
            if key in self._loading:
                try:
                    self._llms[key] = self._loading[key].result()
                finally:
                    self._loading.pop(key, None)  # (failed: loaded in line next time, its error raised then)
            else:
                self._llms[key] = self._load_llm(base, scores, cfg)
            self.stages.stage("answering")
        return self._llms[key]

    def _settle_loading(self) -> None:
        """Wait for the loads `_prefetch` began, and forget the failed ones: a model's load redirects the process's
        stdout and stderr while it runs (llama.cpp's own silencing), so none may outlast the answer that began it,
        whose caller's own redirection (`quiet`) ends with it. The question parser's warm-up is forgotten either way
        (failed, the parse raises its own error in line)."""
        if self._loading:
            from concurrent.futures import wait
            wait(list(self._loading.values()))
            self._loading = {k: f for k, f in self._loading.items() if f.exception() is None and k != PARSER}

    @staticmethod
    def _llm_key(base: str, scores: bool, cfg: LLMConfig | None) -> tuple[tuple, LLMConfig]:
        cfg = cfg or (LLMConfig(prompt_tokens=RerankConfig.prompt_tokens) if scores else LLMConfig())
        return (base, scores, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat, cfg.half), cfg

    def who_llm(self) -> str | None:
        """The LLM whose name scores the served Who fit weighs (the routing table's `who_llm_for`); where that is not
        the reader in use, said once: the LLM the fit weighs is not installed (the first stage answers), or the user
        named another (--llm: served as asked)."""
        table = self.routes()
        llm, use = table.llm, table.who_llm
        if llm is not None:
            made_with = self.fit(llm).ranker.llm_prompt()["llm"]
            if made_with not in (None, model_name(llm)) and use != made_with and made_with not in self._warned:
                self._warned.add(made_with)
                log.warning("the Who ranker's fit weighs %s's name scores; %s", made_with,
                            f"{model_name(llm)} scores them, as asked" if use else
                            "it is not installed (`whoqa models`), so Who answers come from its first stage")
        return use

    def _scoring_llm(self, llm: str, fit) -> tuple[str, LLMConfig]:
        """(the model, its config) whose name scores the served fit weighs: the prompt budget it was measured with,
        and its weights requantised as they were (e.g. Q4_0; `whoqa.reader.models.requantised`), resolved once per
        model and weights."""
        prompt = fit.ranker.llm_prompt()
        cfg, weights = LLMConfig(prompt_tokens=prompt["prompt_tokens"]), prompt["weights"]
        if not weights:
            return llm, cfg
        if (llm, weights) not in self._scorers:
            self._scorers[(llm, weights)] = self._requantised(llm, weights)
        return self._scorers[(llm, weights)], cfg

    def answering_llm(self, llm: str, options: dict | None = None) -> tuple[str, LLMConfig]:
        """(the model, its config) that writes answers: the options of the LLM run the route measured (else
        LLMConfig's), through llama-cpp-python on the weights measured where the LLM was measured answering so and
        that runtime runs it here (`native_answers`: the 1.5B within the time bound)."""
        cfg = replace(LLMConfig(), **llm_answer_options(options or {}))  # (another version's record: known fields)
        m = native_answers(llm, self._device())
        if m is None:
            return llm, cfg
        if m.weights and (llm, m.weights) not in self._scorers:
            self._scorers[(llm, m.weights)] = self._requantised(llm, m.weights)
        return self._scorers[(llm, m.weights)] if m.weights else llm, replace(cfg, runtime="llama-cpp-python")

    def _requantised(self, llm: str, weights: str) -> str:
        """The LLM's weights requantised to `weights` where llama-cpp-python scores names (made once), else as
        installed: the scores then differ from the fit's by the requantisation's rounding, which is logged."""
        if self.scoring_runtime(llm) == "llama-cpp-python":
            try:
                from whoqa.reader.models import requantised, requantised_path
                if not requantised_path(llm, weights).is_file():  # (install.sh makes it; else once, here)
                    self.stages.stage(f"making the language model's {weights} weights (once, about 10 s)")
                return str(requantised(llm, weights))
            except FileNotFoundError as e:  # (not a GGUF model)
                why = str(e)
        else:
            why = "llama-cpp-python does not score names here"
        log.warning("the served fit weighs %s's names as %s weights score them; %s, so they are scored with its "
                    "installed weights", model_name(llm), weights, why)
        return llm

    def _load_llm(self, base: str, scores: bool, cfg: LLMConfig):
        from whoqa.reader.llm import LLMReader
        from whoqa.reader.runtimes import served_runtime
        return LLMReader(base, self.cfg.device, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat, cfg.half,
                         served_runtime(base, self.cfg.device, scores, cfg.runtime), scores=scores)

    def _prefetch(self, book_id: str, chosen: Route) -> None:
        """Begin loading the LLM the route will read, in a thread, while the book and its index open (Lucene builds a
        new book's index in its JVM; llama.cpp reads the model outside Python's lock): a first answer then waits for
        the longer of the two, not their sum. Nothing to overlap once the book is open."""
        scores = chosen.name == "features"
        if book_id in self._opened or chosen.name not in ("features", "llm"):
            return
        from concurrent.futures import ThreadPoolExecutor
        self._loader = self._loader or ThreadPoolExecutor(2, thread_name_prefix="whoqa-load")
        llm = self.who_llm() if scores else self.routes().llm
        if scores and set(self.fit(llm).ranker.features["stage1"]) & set(ROLE_FEATURES):
            from whoqa.ranker.syntax import warm
            self._loading[PARSER] = self._loader.submit(warm)  # (the fit parses each question)
        if llm is None:
            return
        base, cfg = self._scoring_llm(llm, self.fit(llm)) if scores else self.answering_llm(llm, chosen.options)
        key, cfg = self._llm_key(base, scores, cfg)
        if key not in self._llms and key not in self._loading:
            self._loading[key] = self._loader.submit(self._load_llm, base, scores, cfg)

    def scoring_runtime(self, base: str) -> str:
        """The runtime this service scores names with for an LLM (whoqa.reader.runtimes.served_runtime)."""
        from whoqa.reader.runtimes import served_runtime
        return served_runtime(base, self.cfg.device, scores=True)

    def fit(self, llm: str | None):
        from whoqa.ranker.fits import served_fit, shipped_fit
        key = llm or ""
        if key not in self._fits:
            self._fits[key] = served_fit(self.home, model_name(llm)) if llm else shipped_fit()
        return self._fits[key]

    def pool(self, who: bool) -> ShotPool:
        """The few shots' questions (whoqa.reader.prompt): the workspace's Who questions for name scores, all its
        questions for answers (a workspace without any, a user's: the shipped ones `eval --data` measured answers
        with); a question of the workspace gets the shots it was measured with."""
        from whoqa.reader.prompt import question_pool, shipped_pool, who_pool
        key = "who" if who else "all"
        if key not in self._pools:
            pool = who_pool(self.home) if who else question_pool(self.home)
            self._pools[key] = pool if pool.rows or who else shipped_pool()
        return self._pools[key]

    def routes(self) -> RoutingTable:
        """The routing table of the workspace whose measurements serve, read again when its files change."""
        key = state_key(self.home)
        if self._routes is None or self._routes.key != key:
            self._routes = RoutingTable.load(self.home, self.cfg)
        return self._routes

    # --- answers -----------------------------------------------------------------------------------------------
    def route(self, book_id: str, question: str, forced: str = "auto") -> Route:
        """The route, by the measurements of the workspace whose models serve (`fits_from`'s, for `eval --data`)."""
        return self.routes().route(book_id, question, forced)

    def answer(self, book_id: str, question: str, route: str = "auto", upto: str | None = None) -> Answer:
        """The answer by the chosen route; with `upto` ("40%", "Chapter 12"), from the text before that point only.
        A question no sentence matches (by a content word or a named character; before the cut with `upto`) gets no
        answer from any route, before a model loads: NothingMatched. (An answer from passages that match stands only
        where they hold it: `_grounded`.)"""
        question = check_request(question, route, self.cfg)
        t0 = time.perf_counter()
        with self.lock:
            try:
                chosen = self.route(book_id, question, route)
                self._prefetch(book_id, chosen)
                opened, cut = self.upto(book_id, upto)
                if cut and chosen.name == "network":  # its memory arrays hold the whole book
                    if route == "network":
                        raise ValueError("--route network reads the whole book: with --upto, use the feature ranker "
                                         "(--route features or auto)")
                    chosen = Route("features", "the memory network reads the whole book, and only the text up to "
                                               f"{upto} may be read")
                if not matches_question(opened[2], question, opened[1]):  # no answer from nothing, by any route
                    raise NothingMatched(f"nothing in book {book_id} matches the question's words, so there is "
                                         f"nothing to answer from: ask with words (or character names) the book uses")
                self.stages.stage("answering")
                if chosen.name == "reader":
                    ans = self._reader_answer(book_id, question, opened, chosen.model)
                elif chosen.name == "llm":
                    ans = self._llm_answer(book_id, question, opened, chosen.options)
                else:
                    ans = {"network": self._network_answer,
                           "features": self._features_answer}[chosen.name](book_id, question, opened)
            finally:
                self._settle_loading()
                self.stages.done()
        ans.route, ans.reason, ans.upto = chosen.name, chosen.reason, cut
        ans.seconds = round(time.perf_counter() - t0, 4)
        return ans

    def _passage_windows(self, opened: tuple, question: str) -> list[list]:
        """A non-Who question's windows by ServiceConfig.passages (whoqa.retrieval.passages): its content words and
        characters, fused with the book's MiniLM sentence vectors where so configured (encoded once per book)."""
        from whoqa.retrieval.passages import DenseIndex, passage_windows
        book = opened[0]
        dense = None
        if self.cfg.passages.fusion != "bm25f":
            key = (book.id, len(book.sentences))  # a book cut by --upto has an index of its own prefix
            if key not in self._dense and book.id in self._encoding:
                self.stages.stage("reading the book's sentences into vectors (once per book)")
                try:
                    self._encoding[book.id].result()  # (begun at intake: its file is then read below)
                except Exception as e:  # noqa: BLE001 (encoded again in line below, which raises its own error)
                    log.warning("encoding book %s's sentence vectors in the background failed (%s): again now",
                                book.id, e)
                finally:
                    self._encoding.pop(book.id, None)
            if key not in self._dense:
                self.stages.stage("reading the book's sentences into vectors (once per book)")
                if len(self._dense) >= KEEP_BOOKS:
                    self._dense.popitem(last=False)
                self._dense[key] = DenseIndex(book, self.ws.book_vectors(book.id), self._device())
            dense = self._dense[key]
        return passage_windows(opened, question, self.cfg.passages, dense)

    def vectors_later(self, book_id: str) -> None:
        """Begin encoding a book's sentence vectors in a thread of their own (once per book; nothing where they are
        kept already or retrieval reads none), so the first question that is not a Who question finds them made: a
        process that lives on calls it once a book is in (`chat`, the page's upload). The encoder loads here, in the
        caller's thread: a model's loading patches torch for the process (empty weights), which no other thread's
        tensors may meet; only the encoding runs beside."""
        if self.cfg.passages.fusion == "bm25f" or book_id in self._encoding or self.ws.book_vectors(book_id).is_file():
            return
        from concurrent.futures import ThreadPoolExecutor
        from whoqa.core.book import Book
        from whoqa.core.minilm import bundled_minilm
        from whoqa.retrieval.passages import DenseIndex, _encoder
        path, device = self.ws.book_vectors(book_id), self._device()
        _encoder(bundled_minilm("use PassageConfig.fusion 'bm25f'"), device)  # (loaded once, in this thread)
        self._encoder = self._encoder or ThreadPoolExecutor(1, thread_name_prefix="whoqa-vectors")
        self._encoding[book_id] = self._encoder.submit(
            lambda: DenseIndex(Book.load(self.ws.books / book_id, book_id), path, device))

    def _device(self) -> str | None:
        return None if self.cfg.device == "auto" else self.cfg.device

    def _grounded(self, ans: Answer, book, wins: list[list], text: str | None) -> Answer:
        """The answer with the sentences it rests on; withheld (found False) where no passage sentence holds it."""
        g = self.cfg.grounding
        best, grounds = ground(book, wins, text, g, ans.question)
        ans.support, ans.found = round(best, 3), bool(text) and best >= g.threshold
        ans.grounds = [Evidence(x.sentence, x.text, x.marks, support=round(x.support, 3)) for x in grounds]
        if not ans.found:
            ans.answer, ans.withheld = None, text
        return ans

    def _windows(self, opened: tuple, question: str, spans=None) -> list[list]:
        """The question's BM25F windows, searched once: the recipe of the stored contexts training read."""
        from whoqa.retrieval.bm25f import RetrievalConfig, question_windows
        book, aliases, index = opened
        return question_windows(index, question, aliases, len(book.sentences), RetrievalConfig(), spans)

    def _who(self, book_id: str, question: str, opened: tuple) -> tuple:
        """(the question's name spans, its windows, its context sentences, warnings)."""
        from whoqa.retrieval.bm25f import context_sentences
        book, aliases, _ = opened
        if not book.characters:
            raise ValueError(f"book {book_id} has no characters to answer with (the engine found no person in it)")
        spans = name_spans(question, aliases)
        warnings = [f"the question names {n!r}, who is not a character of this book" for n in unknown_names(spans)]
        wins = self._windows(opened, question, spans)
        return spans, wins, context_sentences(wins, len(book.sentences)), warnings

    def _network_answer(self, book_id: str, question: str, opened: tuple) -> Answer:
        from whoqa.ranker.features import CONTEXT_SENTENCES
        spans, _, context, _ = self._who(book_id, question, opened)
        net = self.network()
        got = net.ask(book_id, question, self.cfg.top, self.cfg.evidence, opened, spans, context)
        book = opened[0]
        chars = [Ranked(i, n, p) for i, (n, p) in zip(got.character_ids, got.characters)]
        attention = [Evidence(s, text, [], w) for (w, text), s in zip(got.evidence, got.evidence_sentences)]
        if net.calibration is None:
            got.warnings.append("no cross-validated run of this model's recipe measured its calibration, so no "
                                "probability is shown: run `whoqa train --folds 10` with the same options")
        evidence = evidence_for(book, context[:CONTEXT_SENTENCES], chars, question, self.cfg.evidence)
        return Answer(question, book_id, "who", "network", "", f"memory network {net.model_name} "
                      f"({len(net.members)} member(s))", chars, evidence=evidence,
                      attention=attention, calibration=got.calibration, warnings=got.warnings,
                      why=["a model trained on questions about this workspace's books chose it"]
                      + who_reasons(book, context[:CONTEXT_SENTENCES], chars, named_characters(spans)))

    def _features_answer(self, book_id: str, question: str, opened: tuple) -> Answer:
        from whoqa.ranker.features import CONTEXT_SENTENCES
        from whoqa.ranker.serve import rank
        spans, wins, context, warnings = self._who(book_id, question, opened)
        llm = self.who_llm()
        fit = self.fit(llm)
        reader = None
        if llm:
            base, cfg = self._scoring_llm(llm, fit)
            reader = self.llm(base, scores=True, cfg=cfg)
        written = None
        if "written" in fit.ranker.features["stage1"] or "written_any" in fit.ranker.features["stage1"]:
            written, _ = self._write(book_id, question, opened)  # the reader writes the answer; linked to the cast
        got = rank(fit.ranker, opened, question, spans, wins, reader, self.pool(who=True), self.slot_scorer(fit),
                   written.linked if written else None)
        book = opened[0]
        chars = one_per_name([Ranked(i, book.characters[i].name, p, s)
                              for i, p, s in zip(got.ids, got.probabilities, got.llm)], self.cfg.top)
        r = fit.ranker
        model = (f"feature ranker + {llm} ({reader.runtime}) reading the passages for its top {r.top_k}" if llm else
                 "feature ranker, first stage (no local LLM)")
        calibration = {"by": "maximum likelihood on other books' questions", "fit": fit.where,
                       "fit_of": f"run {fit.measured_on}" if fit.measured_on else "the 41 shared books (shipped)",
                       "questions": r.questions, "ece": r.ece, "provenance": fit.provenance,
                       "stage": "both" if got.read else "first"}
        evidence = evidence_for(book, context[:CONTEXT_SENTENCES], chars, question, self.cfg.evidence)
        why = who_reasons(book, context[:CONTEXT_SENTENCES], chars, named_characters(spans))
        if written is not None:
            evidence, why = written_evidence(book, written, chars, evidence, self.cfg.evidence), \
                written_reasons(book, written, chars) + why
        return Answer(question, book_id, "who", "features", "", model, chars, evidence=evidence,
                      calibration=calibration, warnings=warnings, why=why)

    def _reader_answer(self, book_id: str, question: str, opened: tuple, model: str | None = None) -> Answer:
        from whoqa.reader.ask import ReaderAsker
        model = model or self.cfg.reader_model
        if model not in self._readers:
            self.stages.stage("loading the reader")
            self._readers[model] = ReaderAsker(self.home, model, device=self.cfg.device)  # the models that serve
        reader = self._readers[model]
        got = reader.ask(book_id, question, opened)
        # what it read (the stored contexts' recipe it trained on); a reader of no passage: the book's best passages
        wins = (self._windows(opened, question)[:len(got.passages)] if reader.passages else
                self._passage_windows(opened, question)[:LLMConfig.top_k])
        why = [f"a reader trained on other books' questions wrote it after reading the book's {len(got.passages)} "
               f"passage{'s' * (len(got.passages) != 1)} closest to your question"]
        return self._grounded(Answer(question, book_id, "reader", "reader", "", f"FiD reader {reader.model_name}",
                                     answer=got.answer, passages=got.passages, why=why), opened[0], wins, got.answer)

    def written(self, book_id: str, question: str, upto: str | None = None):
        """A Who question answered as the reader of other questions writes answers, linked to the book's cast
        (whoqa.ranker.written): (Written, the reader's Answer)."""
        with self.lock:
            return self._write(book_id, question, self.upto(book_id, upto)[0])

    def _write(self, book_id: str, question: str, opened: tuple):
        from whoqa.core.names import name_spans, named_characters
        from whoqa.ranker.written import link
        wins = self._passage_windows(opened, question)
        ans = self._llm_answer(book_id, question, opened, wins=wins)
        sentences = [s for a, b, *_ in wins[:len(ans.passages)] for s in range(int(a), int(b) + 1)]
        named = named_characters(name_spans(question, opened[1]))
        return link(opened[0], opened[1], question, named, ans.answer or ans.withheld, sentences), ans

    def _llm_answer(self, book_id: str, question: str, opened: tuple, options: dict | None = None,
                    wins: list | None = None) -> Answer:
        """The installed LLM's answer, with the options of the LLM run the route measured (else LLMConfig's)."""
        from whoqa.reader.llm import answer_from_book
        llm = self.routes().llm
        if llm is None:
            raise FileNotFoundError("no local LLM installed: `bash install.sh` installs one")
        base, cfg = self.answering_llm(llm, options)
        wins = wins if wins is not None else self._passage_windows(opened, question)
        reader, pool = self.llm(base, scores=False, cfg=cfg), self.pool(who=False)
        text, passages = answer_from_book(reader, opened, question, pool, cfg, wins)
        shown = ", ".join([f"{k} {v}" for k, v in sorted(asdict(cfg).items())
                           if getattr(LLMConfig, k) != v and k != "runtime"]
                          + [f"{min(cfg.shots, len(pool.rows))} example questions", reader.runtime]
                          + ([f"weights {model_name(base)}"] if base != llm else []))
        rouge = measured_rouge(llm)
        why = ([f"a small language model ({model_name(llm)}) wrote it after reading the book's {len(passages)} "
                f"passage{'s' * (len(passages) != 1)} closest to your question"]
               + ([f"treat it as a rough guess: on test questions its answers share about {rouge:.0f}% of "
                   f"their wording with people's answers"] if rouge is not None else []))
        return self._grounded(Answer(question, book_id, "reader", "llm", "", f"{llm} ({shown})", answer=text,
                                     passages=passages, why=why), opened[0], wins[:len(passages)], text)
