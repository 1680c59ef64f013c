"""The routing table: which route answers a question about a book, read once from what the workspace measured.

Why one table: the measurements a route rests on (the memory network's and the feature ranker's P@1, the FiD
readers' ROUGE-L, the reader `whoqa eval` chose per question word, the installed LLM) are read here once, and again
only when the files they come from change (`state_key`); the service asks the table for every answer, the full
task's replay (`whoqa eval`) writes the word routes it reads, and both follow the one rule `by_word_serves`.

- a Who question about a book the served memory network trained on: the network, when its cross-validated P@1 on
  those books beats the feature ranker's on the same questions (its own measurement there, or its book-level figure);
  else the feature ranker;
- a Who question about any other book: the feature ranker, with the local LLM reading the passages where one is
  installed (its first stage alone otherwise);
- any other question: the reader `whoqa eval` chose for its question word (whoqa.reader.routes), where that reader
  can serve; else the trained FiD reader where its cross-validated ROUGE-L beats the best installed LLM's measured
  one; else that LLM (the best measured whose answer takes at most READ_SECONDS on 2 cores). A reader of no passage
  of the book (context none) serves only the workspace's training books.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from whoqa.core.artifacts import read_cache
from whoqa.core.query import Query
from whoqa.core.questions import QuestionKind
from whoqa.core.workspace import Workspace
from whoqa.llm.registry import ANSWERS, LLM, measured, registered
from whoqa.ranker.config import RerankConfig
from whoqa.llm.config import LLMConfig, model_name
from whoqa.reader.routes import ROUTES_FILE, WordRoutes, gain, reads_the_book, route_by_word

ROUTES = ("network", "features", "reader", "llm")
ANSWERABLE = ("bm25f",)  # passages an LLM answer is given per question (whoqa.llm.reader.answer_from_book)
READ_SECONDS = 10.0  # the slowest LLM answer (p50, 2 cores) the default route accepts


def measured_llm(llm: str | None) -> LLM | None:
    """The registry's entry of an LLM measured as a reader (a path given as --llm: by its name), else None."""
    m = registered(llm)
    return m if m is not None and ANSWERS in m.roles else None


def native_answers(llm: str, device=None) -> LLM | None:
    """The LLM's measurement where its answers come through llama-cpp-python here (measured so, and that runtime runs
    it on this machine's CPU: whoqa.llm.runtimes.scoring_runtime), else None (gpt4all's llama.cpp, or the runtime
    LLMConfig chooses)."""
    from whoqa.llm.runtimes import scoring_runtime
    m = measured_llm(llm)
    if m is None or m.fast_seconds is None:
        return None
    return m if scoring_runtime(llm, device) == "llama-cpp-python" else None


@dataclass
class Route:
    name: str  # one of ROUTES
    reason: str  # one line: why this route, with the measurements that chose it
    model: str | None = None  # the FiD reader that answers (route "reader"; None: the best cross-validated)
    options: dict | None = None  # route "llm": the answer options of the LLM run it was measured as (None: defaults)


# --- the rule ------------------------------------------------------------------------------------------------------
def by_word_serves(paired: dict) -> bool:
    """Whether routing by question word serves: only where it gained over the best single reader out of fold."""
    return gain(paired or {}) > 0


def word_routes(runs: dict[str, dict[int, str]], routable: dict[str, float], refs: dict[int, list[str]],
                who_ids: set[int], kinds: dict[int, str], questions: list[dict]) -> WordRoutes | None:
    """The full task's replay: the questions outside the Who set routed by question word among the routable readers
    (None with fewer than two)."""
    names = sorted(routable)
    if len(names) < 2:
        return None
    books = {q["question_id"]: q["document_id"] for q in questions}
    return route_by_word({n: runs[n] for n in names}, {q: r for q, r in refs.items() if q not in who_ids}, kinds,
                         books)


def served_from(record: dict | None, word: str) -> tuple[str, dict, str] | None:
    """(the reader `whoqa eval` chose for a question of this wh-word, its record, why in one line) from its record
    (reader_routes.json): the one its question word chose where `by_word_serves`, else the best single reader; None
    without a usable record."""
    if not record or not isinstance(record.get("served"), dict) or not record.get("default"):
        return None  # missing, damaged or of another shape: the service's other rules decide (`whoqa eval` remakes it)
    paired = record.get("paired_vs_default") or {}
    routed = gain(paired)
    default, readers = record["default"], record.get("readers") or {}
    if not by_word_serves(paired):
        why = (f"{default}, the best reader over this workspace's questions (ROUGE-L "
               f"{record.get('rouge_l', {}).get(default, float('nan')):.2f}); routing by question word gained "
               f"{routed:+.2f} out of fold (`whoqa eval`)")
        return default, readers.get(default, {}), why
    name = record["served"].get(word, default)
    scores = (record.get("rouge_l_by_word") or {}).get(word, {})
    others = sorted(((s, r) for r, s in scores.items() if r != name), reverse=True)
    why = (f"{word!r} questions go to {name}: ROUGE-L {scores[name]:.2f} on this workspace's {word!r} questions"
           + (f" vs {others[0][1]}'s {others[0][0]:.2f}" if others else "")
           + f" (chosen by book folds: {routed:+.2f} over the best single reader, `whoqa eval`)"
           if name in scores else f"{name}, the best reader over every question (`whoqa eval`)")
    return name, readers.get(name, {}), why




# --- what the table is read from -----------------------------------------------------------------------------------
def installed_llm(wanted: str | None = None) -> str | None:
    """The LLM to read with: `wanted` (checked to exist), else the best measured one installed within READ_SECONDS,
    else None (no local LLM: the feature ranker's first stage answers Who questions; other questions need a
    reader). Unnamed, WHOQA_LLM names it (a model or an OpenAI-compatible server's address)."""
    import os
    from whoqa.llm.models import llm_installed, locate
    wanted = wanted or os.environ.get("WHOQA_LLM") or None
    if wanted == "none":
        return None
    if wanted:
        locate(wanted)  # a clear FileNotFoundError naming it and how to install it
        return wanted
    for m in measured(ANSWERS):
        if llm_installed(m.name) and m.answer_seconds(native_answers(m.name) is not None) <= READ_SECONDS:
            return m.name
    return None


def who_llm_for(ws: Workspace, llm: str | None, named: bool) -> str | None:
    """The LLM whose name scores the Who fit served with `llm` weighs: `llm` where that fit was made with it (a
    workspace's fit for it) or the user named it (`named`: --llm), else the LLM the fit records (the shipped fit: the
    0.5B) if installed; None (the first stage alone) if not. A better reader installed for other questions (the 1.5B)
    never scores names for weights fit to another model's scores."""
    from whoqa.ranker.fits import served_fit
    from whoqa.llm.models import llm_installed
    if llm is None:
        return None
    made_with = served_fit(ws, model_name(llm)).ranker.llm_prompt()["llm"]
    if made_with is None or made_with == model_name(llm) or named:
        return llm
    return made_with if llm_installed(made_with) else None


def network_for(ws: Workspace, wanted: str | None = None):
    """(the memory network that would serve: its Choice, the books it trained on) or (None, []) where none is
    trained. Read from its saved config: nothing is loaded."""
    from whoqa.memnet.checkpoint import saved_config
    from whoqa.memnet.choose import choose_model
    try:
        choice = choose_model(ws, wanted)
    except FileNotFoundError:
        if wanted:
            raise
        return None, []
    books = saved_config(ws.models / choice.name).get("stats", {}).get("trained_books")
    if books is None:  # models saved before the record: the books with Who questions
        from whoqa.core.store import load_who_set
        try:
            books = sorted({q["document_id"] for q in load_who_set(ws)[1]})
        except (FileNotFoundError, ValueError):
            books = []
    return choice, books


def features_p1(ws: Workspace, run: str | None, llm: str | None) -> tuple[float, str]:
    """(the feature ranker's P@1, where it was measured): on the run's own questions where `whoqa rerank RUN
    --candidates features` measured it, else its book-level figure on the 41 shared books (with the LLM, or its
    first stage alone)."""
    from whoqa.ranker.fits import fit_dir, read_summary, shipped_fit
    if run and llm:
        s = read_summary(fit_dir(ws, run, model_name(llm), RerankConfig.top_k, "features"))
        if s and "combined" in s:
            return s["combined"]["p@1"], f"on run {run}'s questions"
    p = shipped_fit().provenance
    cv = p["book_level_cv"] if llm else p["first_stage_cv"]
    return cv["p@1"], "by book-level CV on the 41 shared books" + ("" if llm else ", its first stage")


def training_books(ws: Workspace) -> set[str]:
    """The books of the workspace's questions (WS/questions.json): those its readers trained and were measured on."""
    from whoqa.core.store import load_questions
    try:
        return set(load_questions(ws))
    except FileNotFoundError:
        return set()


STATE_FILES = (("results", "*.json"), ("models", "*/*.json"), ("models", "*/model.pt"), ("runs", "*/summary.json"),
               ("runs", "*/rerank*/summary.json"), ("reader_models", "*/final/*"), ("reader_runs", "*/*.json"))


def state_key(ws: Workspace) -> tuple:
    """What the table is read from, as (path, mtime, size) of each file: a table of another key is read again."""
    paths = itertools.chain([ws.questions], *(sorted(getattr(ws, d).glob(p)) for d, p in STATE_FILES))
    out = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(out)


# --- the table -----------------------------------------------------------------------------------------------------
@dataclass
class RoutingTable:
    """A workspace's routing state (its measurements, the installed LLM), each part read the first time a route needs
    it and kept: a Service keeps one table while `state_key` holds (whoqa.service.Service.routes)."""
    ws: Workspace
    wanted_llm: str | None = None  # ServiceConfig.llm: a model, "none", or None for the best installed
    model: str | None = None  # ServiceConfig.model: the memory network (None: the best cross-validated)
    reader_model: str | None = None  # ServiceConfig.reader_model: the FiD reader (None: the best cross-validated)
    key: tuple = ()  # state_key(ws) when it was made
    _memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, ws: Workspace, cfg) -> "RoutingTable":
        """The table of a workspace for a ServiceConfig's choices (llm, model, reader_model)."""
        return cls(Workspace(ws), cfg.llm, cfg.model, cfg.reader_model, state_key(Workspace(ws)))

    def _once(self, key, make):
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @property
    def llm(self) -> str | None:
        """The LLM that reads (`installed_llm`), looked up once per table."""
        return self._once("llm", lambda: installed_llm(self.wanted_llm))

    @property
    def who_llm(self) -> str | None:
        """The LLM that scores Who names (`who_llm_for`), looked up once per table."""
        return self._once("who_llm", lambda: who_llm_for(self.ws, self.llm, self.wanted_llm not in (None, "none")))

    def network(self):
        return self._once("network", lambda: network_for(self.ws, self.model))

    def features(self, run: str | None) -> tuple[float, str]:
        """The feature ranker's P@1 with the LLM that scores Who names (`features_p1`)."""
        return self._once(("features", run), lambda: features_p1(self.ws, run, self.who_llm))

    def books(self) -> set[str]:
        return self._once("books", lambda: training_books(self.ws))

    def words(self) -> dict | None:
        """The record of `whoqa eval`'s word routes (WS/results/reader_routes.json), None without one."""
        return self._once("words", lambda: read_cache(self.ws.results / ROUTES_FILE, dict))

    def fid(self, contexts: tuple[str, ...] | None):
        """The FiD reader that would serve (reader.choose.choose_model), None where none is trained."""
        from whoqa.reader.choose import choose_model

        def make():
            try:
                return choose_model(self.ws, self.reader_model, contexts=contexts)
            except FileNotFoundError:
                if self.reader_model:
                    raise
                return None
        return self._once(("fid", contexts), make)

    def route(self, book_id: str, query: Query, forced: str = "auto", upto: str | None = None) -> Route:
        """The route for a question (the one place it is decided), with its reason; with `upto`, one that reads only
        the text before the cut (the memory network's arrays hold the whole book)."""
        who = check_route(query.kind, forced)
        if upto and forced == "network":
            raise ValueError("--route network reads the whole book: with --upto, use the feature ranker "
                             "(--route features or auto)")
        if forced != "auto":
            return Route(forced, "as asked")
        chosen = self._who_route(book_id) if who else self._reader_route(book_id, query)
        if upto and chosen.name == "network":
            return Route("features", f"the memory network reads the whole book, and only the text up to {upto} may "
                                     f"be read")
        return chosen

    def _who_route(self, book_id: str) -> Route:
        llm = self.who_llm
        choice, books = self.network()
        fp1, where = self.features(choice.name if choice else None)
        alone = "" if llm else "; no local LLM reads its passages: the feature ranker's first stage alone"
        if choice is None:
            return Route("features", "no memory network is trained in this workspace" + alone)
        if book_id not in books:
            return Route("features", f"the memory network {choice.name} never trained on this book" + alone)
        if choice.score is not None and choice.score > fp1:
            return Route("network", f"its cross-validated P@1 {choice.score:.2f} on the books it trained on beats the "
                                    f"feature ranker's {fp1:.2f} ({where})")
        return Route("features", f"the feature ranker's P@1 {fp1:.2f} ({where}) is not beaten by the memory network "
                                 f"{choice.name}'s " + (f"{choice.score:.2f}" if choice.score is not None else
                                                        "(not cross-validated)") + alone)

    def _reader_route(self, book_id: str, query: Query) -> Route:
        from whoqa.reader.ask import SERVABLE
        from whoqa.reader.choose import final_config
        llm = self.llm
        seen = book_id in self.books()
        by_word = None if self.reader_model else self.word_route(query, seen)
        if isinstance(by_word, Route):
            return by_word
        unmet = f"; {by_word}" if by_word else ""  # the measured best reader cannot serve here: say what would let it
        rouge = measured_rouge(llm)
        fid = self.fid(None if self.reader_model else tuple(c for c in SERVABLE if seen or reads_the_book(c)))
        if self.reader_model and not seen and not reads_the_book(final_config(self.ws, fid.name).get("context")):
            raise ValueError(f"the reader {fid.name} reads no passage of a book (the question alone): it serves only "
                             f"the books this workspace trained on, and {book_id} is not one; use a reader of passages")
        if fid is not None and (llm is None or fid.score is not None and fid.score > (rouge or 0.0)):
            return Route("reader", f"FiD reader {fid.name}: " + (f"its cross-validated ROUGE-L {fid.score:.2f} beats "
                                                                 f"{llm}'s {rouge}" if llm else
                                                                 "no local LLM installed") + unmet,
                         fid.name)  # the reader chosen here serves (for another book: one of its passages)
        if llm is None:
            raise FileNotFoundError("no reader for a question that is not about a character: train one (`whoqa reader "
                                    "train --final`) or " + ("answer with the local LLM (without --llm none)"
                                                             if self.wanted_llm == "none" else
                                                             "install the local LLM (`bash install.sh`)"))
        return Route("llm", f"{llm}, reading the book's passages ("
                            + (f"ROUGE-L {rouge} on the 200-question sample" if rouge is not None else
                               "not measured here") + ")"
                            + (f": the FiD reader {fid.name} did not beat it by cross-validation" if fid else
                               ": no trained FiD reader") + unmet)

    def word_route(self, query: Query, seen: bool = True) -> Route | str | None:
        """The reader `whoqa eval` chose for the question's word on this workspace's books, where it can serve here
        (the installed LLM it measured, or a final FiD reader of the run it measured; one reading no passage only
        for a book the workspace trained on: `seen`); where it cannot, a line saying why or what would let it; None
        without a record."""
        from whoqa.reader.ask import SERVABLE
        from whoqa.reader.model import READER_FILE
        got = served_from(self.words(), query.word)
        if got is None:
            return None
        llm = self.llm
        name, record, why = got
        is_llm, options = record.get("kind") == "llm", record.get("options") or {}
        same_llm = llm is not None and record.get("model") == model_name(llm)  # a path given as --llm: its name
        context = options.get("context", LLMConfig.context) if is_llm else record.get("context")
        makes = context in (ANSWERABLE if is_llm else SERVABLE)  # passages `ask` can make for a new question
        if makes and not seen and not reads_the_book(context):
            return (f"`whoqa eval` measured {name} best for it, which reads no passage of the book (the question "
                    f"alone): its score holds for this workspace's training books only, and this book is not one")
        if is_llm and same_llm and makes:
            return Route("llm", why, options=options)
        if record.get("kind") == "fid" and makes and (self.ws.reader_models / name / "final" / READER_FILE).is_file():
            return Route("reader", why, name)
        if is_llm and not same_llm:
            return f"`whoqa eval` measured {name} best for it, an LLM run of {record.get('model')}, not the LLM in use"
        if not makes:
            return (f"`whoqa eval` measured the {'LLM' if is_llm else 'reader'} run {name} best for it, whose "
                    f"{context} passages `ask` cannot make per question")
        return (f"`whoqa eval` measured the reader run {name} best for it: train its final model (`whoqa reader "
                f"train --final` with the run's options) to serve it")


def measured_rouge(llm: str | None) -> float | None:
    """An LLM's measured ROUGE-L as a reader (whoqa.llm.registry), None where it was not measured."""
    m = measured_llm(llm)
    return m.rouge_l if m else None


def choose_route(ws: Workspace, book_id: str, question: str | Query, cfg, forced: str = "auto") -> Route:
    """The route for a question, from a table read afresh (a Service keeps its table: Service.route)."""
    query = question if isinstance(question, Query) else Query.read(question)
    return RoutingTable.load(ws, cfg).route(book_id, query, forced)


def check_route(kind: QuestionKind, forced: str) -> bool:
    """Whether a question of this kind asks for a person (a Who question, or "Which widow ...?": answered with the
    book's characters); a one-line ValueError for a route that is unknown or does not answer its kind of question."""
    who = kind.person
    if forced not in ("auto", *ROUTES):
        raise ValueError(f"unknown route {forced!r}: use auto, {', '.join(ROUTES)}")
    if forced != "auto" and (forced in ("network", "features")) != who:
        raise ValueError(f"--route {forced} answers {'Who' if forced in ('network', 'features') else 'other'} "
                         f"questions; this one is {'a Who question' if who else 'not a Who question'}")
    return who
