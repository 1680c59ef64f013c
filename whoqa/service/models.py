"""The service's models in one cache: the memory networks, the feature ranker's fits, the local LLMs (loaded once per
model, use and prompt; begun in a thread while a book opens), the trained FiD readers, the few shots' questions and
the routing table. Each loads the first time it is asked for and stays for the process."""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import replace

from whoqa.core.progress import Stages
from whoqa.core.workspace import Workspace
from whoqa.ranker.config import RerankConfig
from whoqa.ranker.features import ROLE_FEATURES
from whoqa.llm.config import LLMConfig, llm_answer_options, model_name
from whoqa.llm.prompt import ShotPool
from whoqa.service.routing import Route, RoutingTable, native_answers, state_key
from whoqa.service.schema import ServiceConfig

PARSER = ("question parser",)  # `prefetch`'s warm-up of whoqa.core.syntax, beside the LLMs' loads
log = logging.getLogger(__name__)


class Models:
    """What answers: loaded once per process (`ws`: the books' workspace; `home`: the workspace whose fits,
    measurements and questions serve)."""

    def __init__(self, ws: Workspace, home: Workspace, cfg: ServiceConfig, stages: Stages):
        self.ws, self.home, self.cfg, self.stages = ws, home, cfg, stages
        self._network = None
        self._slots = None
        self._readers: dict[str | None, object] = {}
        self._llms: dict[tuple, object] = {}
        self._loading: dict[tuple, Future] = {}  # key -> Future of an LLM `prefetch` is loading
        self._loader = None
        self._one_load = threading.Lock()  # (`_load`)
        self._weights: dict[tuple[str, str], str] = {}  # (LLM, weights) -> its model requantised so (`_requantised`)
        self._fits: dict[str, object] = {}
        self._warned: set[str] = set()  # fits' LLMs found missing (`who_llm`), said once
        self._pools: dict[str, ShotPool] = {}
        self._routes: RoutingTable | None = None

    # --- the trained networks and readers --------------------------------------------------------------------------
    def network(self):
        """The memory network that serves (whoqa.memnet.ask.Asker), folding in books prepared without vectors."""
        from whoqa.memnet.ask import Asker
        if self._network is None:
            from whoqa.service.intake import book_stages
            self.stages.stage("loading the memory network")
            self._network = Asker(self.ws, self.cfg.model, device=self.cfg.device,
                                  fold=lambda ws, ids: book_stages().fold_books(ws, ids))
        return self._network

    def slots(self, fit):
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

    def fid(self, model: str | None):
        """A trained FiD reader (whoqa.reader.ask.ReaderAsker) of the workspace whose models serve."""
        from whoqa.reader.ask import ReaderAsker
        model = model or self.cfg.reader_model
        if model not in self._readers:
            self.stages.stage("loading the reader")
            self._readers[model] = ReaderAsker(self.home, model, device=self.cfg.device)
        return self._readers[model]

    def fit(self, llm: str | None):
        """The feature ranker's fit that serves with this LLM's name scores (None: the shipped first stage)."""
        from whoqa.ranker.fits import served_fit, shipped_fit
        key = llm or ""
        if key not in self._fits:
            self._fits[key] = served_fit(self.home, model_name(llm)) if llm else shipped_fit()
        return self._fits[key]

    def pool(self, who: bool) -> ShotPool:
        """The few shots' questions (whoqa.llm.prompt): the workspace's Who questions for name scores, all its
        questions for answers (a workspace without any, a user's: the shipped ones `eval --data` measured answers
        with); a question of the workspace gets the shots it was measured with."""
        from whoqa.llm.prompt import question_pool, shipped_pool, who_pool
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

    # --- the local LLMs --------------------------------------------------------------------------------------------
    def llm(self, base: str, scores: bool, cfg: LLMConfig | None = None):
        """A local LLM, loaded once per (model, use, prompt): for name scores the runtime `scoring_runtime` picks (one
        that gives token probabilities), for answers the one LLMConfig chooses (whoqa.llm.runtimes), with cfg's
        prompt budget, answer length and prompt form. One `prefetch` began loading is waited for; where it failed, the
        model is loaded here once more, whose failure is raised (a background load may fail for a reason of its own
        moment: another thread importing the same library)."""
        key, cfg = self._key(base, scores, cfg)
        if key not in self._llms:
            self.stages.stage(f"loading the language model ({model_name(base)})")
            loading, model = self._loading.pop(key, None), None
            if loading is not None:
                try:
                    model = loading.result()
                except Exception as e:
                    log.info("loading %s in the background failed (%s): loading it here", model_name(base), e)
            self._llms[key] = model if model is not None else self._load(base, scores, cfg)
            self.stages.stage("answering")
        return self._llms[key]

    def chooses(self) -> bool:
        """Whether Who answers come from the shipped choice ranking (whoqa.ranker.reader_choice): shipped, reading on,
        and its reader the one that writes answers here (whoqa.service.who.choosing_reader checks the runtime)."""
        from whoqa.ranker.reader_choice import choice_fit_for
        llm = self.routes().llm
        fit = choice_fit_for(self.home, model_name(llm)) if llm is not None else None
        return fit is not None and self.cfg.reading and model_name(llm) == fit.reader

    def once(self, message: str) -> None:
        """A warning said once per service (the same line for every answer would bury it)."""
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

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

    def scoring_llm(self, llm: str, fit) -> tuple[str, LLMConfig]:
        """(the model, its config) whose name scores the served fit weighs: the prompt budget it was measured with,
        and its weights requantised as they were (e.g. Q4_0; `whoqa.llm.models.requantised`), resolved once per
        model and weights."""
        prompt = fit.ranker.llm_prompt()
        cfg, weights = LLMConfig(prompt_tokens=prompt["prompt_tokens"]), prompt["weights"]
        return (self._requantised(llm, weights) if weights else llm), cfg

    def answering_llm(self, llm: str, options: dict | None = None) -> tuple[str, LLMConfig]:
        """(the model, its config) that writes answers: the options of the LLM run the route measured (else
        LLMConfig's), through llama-cpp-python on the weights measured where the LLM was measured answering so and
        that runtime runs it here (`native_answers`: the 1.5B within the time bound)."""
        cfg = replace(LLMConfig(), **llm_answer_options(options or {}))  # (another version's record: known fields)
        m = native_answers(llm, self.device())
        if m is None:
            return llm, cfg
        return self._requantised(llm, m.weights) if m.weights else llm, replace(cfg, runtime="llama-cpp-python")

    def choosing_llm(self, llm: str) -> tuple[str, LLMConfig]:
        """(the model, its config) that chooses among the passages' people (whoqa.ranker.reader_choice): the one that
        writes answers, on the runtime that scores names here where it is not already llama-cpp-python (choosing
        needs token likelihoods: gpt4all gives none, transformers reads a GGUF file slowly)."""
        from whoqa.llm.config import is_server
        base, cfg = self.answering_llm(llm)
        if cfg.runtime == "auto" and not is_server(llm):  # (a server gives its own likelihoods, or none)
            cfg = replace(cfg, runtime=self.scoring_runtime(llm))
        return base, cfg

    def scoring_runtime(self, base: str) -> str:
        """The runtime this service scores names with for an LLM (whoqa.llm.runtimes.served_runtime)."""
        from whoqa.llm.runtimes import served_runtime
        return served_runtime(base, self.cfg.device, scores=True)

    def prefetch(self, opened: bool, chosen: Route) -> None:
        """Begin loading the LLMs the route will read (a Who fit's name scorer, and the reader that writes its answer
        where the fit reads one), in threads, while the book and its index open (Lucene builds a
        new book's index in its JVM; llama.cpp reads the model outside Python's lock): a first answer then waits for
        the longer of the two, not their sum. Nothing to overlap once the book is open."""
        scores = chosen.name == "features"
        if opened or chosen.name not in ("features", "llm"):
            return
        from concurrent.futures import ThreadPoolExecutor
        self._loader = self._loader or ThreadPoolExecutor(2, thread_name_prefix="whoqa-load")
        llm = self.who_llm() if scores else self.routes().llm
        if scores and set(self.fit(llm).ranker.features["stage1"]) & set(ROLE_FEATURES):
            from whoqa.core.syntax import warm
            self._loading[PARSER] = self._loader.submit(warm)  # (the fit parses each question)
        if llm is None:
            return
        chooses = scores and self.chooses()
        loads = [self.scoring_llm(llm, self.fit(llm)) + (True,)] if scores and not chooses else []
        if not scores or chooses or self.fit(llm).ranker.reads_written and self.cfg.reading:  # (its writer)
            writer = self.routes().llm
            loads += [self.answering_llm(writer, None if scores else chosen.options) + (False,)] if writer else []
        for base, cfg, scoring in loads:
            key, cfg = self._key(base, scoring, cfg)
            if key not in self._llms and key not in self._loading:
                self._loading[key] = self._loader.submit(self._load, base, scoring, cfg)

    def settle(self) -> None:
        """Wait for the loads `prefetch` began, and forget the failed ones: a model's load redirects the process's
        stdout and stderr while it runs (llama.cpp's own silencing), so none may outlast the answer that began it,
        whose caller's own redirection (`quiet`) ends with it. The question parser's warm-up is forgotten either way
        (failed, the parse raises its own error in line)."""
        if self._loading:
            from concurrent.futures import wait
            wait(list(self._loading.values()))
            self._loading = {k: f for k, f in self._loading.items() if f.exception() is None and k != PARSER}

    def device(self) -> str | None:
        return None if self.cfg.device == "auto" else self.cfg.device

    @staticmethod
    def _key(base: str, scores: bool, cfg: LLMConfig | None) -> tuple[tuple, LLMConfig]:
        cfg = cfg or (LLMConfig(prompt_tokens=RerankConfig.prompt_tokens) if scores else LLMConfig())
        return (base, scores, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat, cfg.half), cfg

    def _requantised(self, llm: str, weights: str) -> str:
        """The LLM's weights requantised to `weights` where llama-cpp-python scores names (made once per model and
        weights), else as installed: the scores then differ from the fit's by the requantisation's rounding, which is
        logged."""
        if (llm, weights) in self._weights:
            return self._weights[(llm, weights)]
        if self.scoring_runtime(llm) == "llama-cpp-python":
            try:
                from whoqa.llm.models import requantised, requantised_path
                if not requantised_path(llm, weights).is_file():  # (install.sh makes it; else once, here)
                    self.stages.stage(f"making the language model's {weights} weights (once, about 10 s)")
                self._weights[(llm, weights)] = str(requantised(llm, weights))
                return self._weights[(llm, weights)]
            except FileNotFoundError as e:  # (not a GGUF model)
                why = str(e)
        else:
            why = "llama-cpp-python does not score names here"
        log.warning("the served fit weighs %s's names as %s weights score them; %s, so they are scored with its "
                    "installed weights", model_name(llm), weights, why)
        self._weights[(llm, weights)] = llm
        return llm

    def _load(self, base: str, scores: bool, cfg: LLMConfig):
        """One LLM loaded, one at a time: a load redirects the process's stdout and stderr while it runs (llama.cpp's
        silencing), and two at once would each restore what the other redirected, leaving them silenced."""
        with self._one_load:
            return self._load_now(base, scores, cfg)

    def _load_now(self, base: str, scores: bool, cfg: LLMConfig):
        from whoqa.llm.reader import LLMReader
        from whoqa.llm.runtimes import served_runtime
        from whoqa.llm.server import ServerReader, is_server
        if is_server(base):  # (an OpenAI-compatible server: its own model, asked over HTTP)
            return ServerReader(base, cfg.prompt_tokens, cfg.max_new_tokens)
        return LLMReader(base, self.cfg.device, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat, cfg.half,
                         served_runtime(base, self.cfg.device, scores, cfg.runtime), scores=scores)
