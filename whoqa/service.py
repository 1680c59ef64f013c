"""One path from a book and a question to the best answer whoqa has: `ask`, the web page, `bench` and `eval --data`
all call this.

    intake(text | data + id | id) -> book id     made by the engine and weights the workspace's `prepare` recorded
    answer(book, question, route) -> Answer      one JSON schema (Answer.to_json) for the CLI, the API and eval

The route is chosen in one function, `choose_route`, from what the workspace measured:
- a Who question about a book the served memory network trained on: the network, when its cross-validated P@1 on
  those books beats the feature ranker's on the same questions (its own measurement there, or its book-level figure:
  nothing in it is fit to a book, so it holds for any book); else the feature ranker;
- a Who question about any other book: the feature ranker, with the local LLM reading the passages where one is
  installed (its first stage alone otherwise), calibrated either way;
- any other question: the reader `whoqa eval` chose for its question word (what / why / where ...) on the workspace's
  book folds (whoqa.reader.routes), where that reader can serve (an LLM run answers with the options it was measured
  with); else the trained FiD reader where its cross-validated ROUGE-L beats the best installed LLM's measured one;
  else that LLM (the best measured whose answer takes at most READ_SECONDS on 2 cores). A reader that reads no
  passage of the book (context none: the question alone) serves only the workspace's training books, the books like
  those its score was measured on; any other book gets a reader of its passages.
Every Who answer carries evidence: the context sentences that mention its top character (by name or a resolved
pronoun), those matching the question best first. Every other answer carries the passage sentences it rests on, the
words it shares with them marked (whoqa.reader.grounding); where no passage sentence holds it (support under the
measured threshold), the answer is withheld and whoqa says it did not find it in the book, showing the best passages.
The LLM reads passages retrieved for what the question asks (whoqa.retrieval.passages), not its function words. The
models load once per process and are shared by every caller (one lock: answers run one at a time on a 2-core
machine).
"""
from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from whoqa.core.questions import question_kind
from whoqa.core.names import name_spans, named_characters, unknown_names
from whoqa.core.progress import Stages
from whoqa.core.workspace import Workspace
from whoqa.retrieval.bm25f import NothingMatched, matches_question
from whoqa.reader.config import LLMConfig, RerankConfig, llm_answer_options, model_name
from whoqa.reader.grounding import GroundingConfig, ground
from whoqa.retrieval.passages import PassageConfig

ROUTES = ("network", "features", "reader", "llm")
KEEP_BOOKS = 4  # books kept open (a workspace may hold hundreds)
ANSWERABLE = ("bm25f",)  # passages an LLM answer is given per question (whoqa.reader.llm.answer_from_book)
READ_SECONDS = 10.0  # the slowest LLM answer (p50, 2 cores) the default route accepts
# The local LLMs measured as readers: (name, ROUGE-L on the 200-question sample of the 41 shared books, s/answer on 2
# quiet cores), best first (docs/reader.md). The default reader is the first one installed within READ_SECONDS.
MEASURED_LLMS = (("qwen2.5-coder-1.5b", 15.61, 7.9), ("qwen2.5-coder-0.5b", 12.25, 4.3), ("smollm2-135m", 9.38, 1.5))
WORD = re.compile(r"[a-z]+")
STOP = {"who", "whom", "whose", "what", "the", "a", "an", "of", "to", "in", "on", "at", "is", "was", "does", "did",
        "do", "and", "or", "his", "her", "their", "he", "she", "they", "it", "for", "with", "by", "from", "that", "be"}


@dataclass
class ServiceConfig:
    device: str = "auto"  # where the models run: auto | cpu | cuda[:N]
    llm: str | None = None  # the local LLM that reads (Who name scores, other answers); None: the best installed;
    #                         "none": no LLM (Who questions by the feature ranker's first stage)
    model: str | None = None  # memory network under WS/models (None: the best cross-validated)
    reader_model: str | None = None  # FiD reader under WS/models/reader (None: the best cross-validated)
    top: int = 5  # characters in a Who answer
    evidence: int = 3  # evidence sentences
    passages: PassageConfig = field(default_factory=PassageConfig)  # retrieval for the LLM's passages
    grounding: GroundingConfig = field(default_factory=GroundingConfig)  # when an answer counts as found

    def check(self) -> "ServiceConfig":
        """A one-line ValueError for a setting no answer can have (before any book is prepared or model loaded)."""
        if self.top < 1:
            raise ValueError(f"--top {self.top}: show at least 1 character")
        if self.evidence < 0:
            raise ValueError(f"evidence {self.evidence}: at least 0 sentences")
        return self


@dataclass
class Route:
    name: str  # one of ROUTES
    reason: str  # one line: why this route, with the measurements that chose it
    model: str | None = None  # the FiD reader that answers (route "reader"; None: the best cross-validated)
    options: dict | None = None  # route "llm": the answer options of the LLM run it was measured as (None: defaults)


@dataclass
class Ranked:
    id: int
    name: str
    probability: float | None  # calibrated; None where no calibration holds for this book
    llm: float | None = None  # the LLM's own share among the names it read (feature ranker)


@dataclass
class Evidence:
    sentence: int  # the book's sentence id
    text: str
    marks: list[tuple[int, int]]  # character offsets in text of the top answer's mentions
    attention: float | None = None  # the network's attention (attention list only)
    support: float | None = None  # grounds: the answer's best-span ROUGE-L in this sentence (0..1)


@dataclass
class Answer:
    question: str
    book: str
    kind: str  # who | reader
    route: str
    reason: str
    model: str  # what answered
    characters: list[Ranked] = field(default_factory=list)  # Who: best first
    answer: str | None = None  # other questions: the reader's text, where the passages hold it (else None)
    found: bool | None = None  # other questions: whether a passage sentence holds the answer (GroundingConfig)
    support: float | None = None  # other questions: the answer's best ROUGE-L against a passage sentence (0..1)
    withheld: str | None = None  # the reader's text where no passage holds it: never shown as the answer
    grounds: list[Evidence] = field(default_factory=list)  # the sentences the answer rests on (not found: the best
    #                                                        passages'), the words it shares with them marked
    passages: list[str] = field(default_factory=list)  # what the reader read
    evidence: list[Evidence] = field(default_factory=list)  # sentences mentioning the top character
    attention: list[Evidence] = field(default_factory=list)  # the network's most attended sentences
    calibration: dict | None = None  # where the probabilities' scale comes from
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    why: list[str] = field(default_factory=list)  # why this answer, in a reader's words (the facts it weighed)
    upto: dict | None = None  # the text read, where the question asked for no spoilers: {"spec", "sentences", "of"}

    def to_json(self) -> dict:
        return asdict(self)


def installed_llm(wanted: str | None = None) -> str | None:
    """The LLM to read with: `wanted` (checked to exist), else the best measured one installed within READ_SECONDS,
    else None (no local LLM: the feature ranker's first stage answers Who questions; other questions need a
    reader)."""
    from whoqa.reader.llm import locate
    if wanted == "none":
        return None
    if wanted:
        locate(wanted)  # a clear FileNotFoundError naming it and how to install it
        return wanted
    for name, _, seconds in MEASURED_LLMS:
        if seconds <= READ_SECONDS and llm_installed(name):
            return name
    return None


def llm_installed(name: str) -> bool:
    """Whether a packaged LLM's packages are there (found, not imported or joined)."""
    import importlib.util
    from whoqa.reader.llm import JOINED, PACKAGED
    packages = [p for p, _ in JOINED[name]["packages"]] if name in JOINED else [PACKAGED[name][0]]
    return all(importlib.util.find_spec(p) is not None for p in packages)


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
        from data_prep.who_set import load_who_set
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
    from data_prep.who_set import load_questions
    try:
        return set(load_questions(ws))
    except FileNotFoundError:
        return set()


def choose_route(ws: Workspace, book_id: str, question: str, cfg: ServiceConfig, forced: str = "auto") -> Route:
    """The route for a question (the one place it is decided), with its reason."""
    who = check_route(question, forced)
    if forced != "auto":
        return Route(forced, "as asked")
    if who:
        llm = installed_llm(cfg.llm)
        choice, books = network_for(ws, cfg.model)
        fp1, where = features_p1(ws, choice.name if choice else None, llm)
        alone = "" if llm else "; no local LLM installed: the feature ranker's first stage alone"
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
    llm = installed_llm(cfg.llm)
    seen = book_id in training_books(ws)
    by_word = None if cfg.reader_model else word_route(ws, question, llm, seen)
    if isinstance(by_word, Route):
        return by_word
    unmet = f"; {by_word}" if by_word else ""  # the measured best reader cannot serve here: say what would let it
    rouge = next((r for n, r, _ in MEASURED_LLMS if n == llm), None)
    from whoqa.reader.ask import SERVABLE
    from whoqa.reader.choose import choose_model, final_config
    from whoqa.reader.routes import reads_the_book
    try:
        fid = choose_model(ws, cfg.reader_model, contexts=None if cfg.reader_model else
                           tuple(c for c in SERVABLE if seen or reads_the_book(c)))
    except FileNotFoundError:
        if cfg.reader_model:
            raise
        fid = None
    if cfg.reader_model and not seen and not reads_the_book(final_config(ws, fid.name).get("context")):
        raise ValueError(f"the reader {fid.name} reads no passage of a book (the question alone): it serves only the "
                         f"books this workspace trained on, and {book_id} is not one; use a reader of passages")
    if fid is not None and (llm is None or fid.score is not None and fid.score > (rouge or 0.0)):
        return Route("reader", f"FiD reader {fid.name}: " + (f"its cross-validated ROUGE-L {fid.score:.2f} beats "
                                                             f"{llm}'s {rouge}" if llm else "no local LLM installed")
                     + unmet)
    if llm is None:
        raise FileNotFoundError("no reader for a question that is not about a character: train one (`whoqa reader "
                                "train --final`) or " + ("answer with the local LLM (without --llm none)"
                                                         if cfg.llm == "none" else
                                                         "install the local LLM (`bash install.sh`)"))
    return Route("llm", f"{llm}, zero-shot, reading the book's passages ("
                        + (f"ROUGE-L {rouge} on the 200-question sample" if rouge is not None else "not measured here")
                        + ")"
                        + (f": the FiD reader {fid.name} did not beat it by cross-validation" if fid else
                           ": no trained FiD reader") + unmet)


def check_route(question: str, forced: str) -> bool:
    """Whether the question is a Who question; a one-line ValueError for a route that is unknown or does not answer
    its kind of question."""
    who = question_kind(question).who
    if forced not in ("auto", *ROUTES):
        raise ValueError(f"unknown route {forced!r}: use auto, {', '.join(ROUTES)}")
    if forced != "auto" and (forced in ("network", "features")) != who:
        raise ValueError(f"--route {forced} answers {'Who' if forced in ('network', 'features') else 'other'} "
                         f"questions; this one is {'a Who question' if who else 'not a Who question'}")
    return who


def check_request(question: str, route: str, cfg: ServiceConfig) -> str:
    """The question (stripped), route and settings checked before any work: `ask --text` prepares no book for a
    question, route or --top that would be refused after. One-line ValueError."""
    question = check_question(question)
    check_route(question, route)
    cfg.check()
    return question


def word_route(ws: Workspace, question: str, llm: str | None, seen: bool = True) -> Route | str | None:
    """The reader `whoqa eval` chose for the question's word on this workspace's books (whoqa.reader.routes), where
    it can serve here (the installed LLM it measured, or a final FiD reader of the run it measured; one reading no
    passage only for a book the workspace trained on: `seen`); where it cannot, a line saying why or what would let
    it; None without a record."""
    from whoqa.reader.ask import SERVABLE
    from whoqa.reader.model import READER_FILE
    from whoqa.reader.routes import reads_the_book, served_reader
    got = served_reader(ws.results, question)
    if got is None:
        return None
    name, record, why = got
    is_llm, options = record.get("kind") == "llm", record.get("options") or {}
    same_llm = llm is not None and record.get("model") == model_name(llm)  # a path given as --llm: its name
    context = options.get("context", LLMConfig.context) if is_llm else record.get("context")
    makes = context in (ANSWERABLE if is_llm else SERVABLE)  # passages `ask` can make for a new question
    if makes and not seen and not reads_the_book(context):
        return (f"`whoqa eval` measured {name} best for it, which reads no passage of the book (the question alone): "
                f"its score holds for this workspace's training books only, and this book is not one")
    if is_llm and same_llm and makes:
        return Route("llm", why, options=options)
    if record.get("kind") == "fid" and makes and (ws.reader_models / name / "final" / READER_FILE).is_file():
        return Route("reader", why, name)
    if is_llm and not same_llm:
        return f"`whoqa eval` measured {name} best for it, an LLM run of {record.get('model')}, not the LLM in use"
    if not makes:
        return (f"`whoqa eval` measured the {'LLM' if is_llm else 'reader'} run {name} best for it, whose {context} "
                f"passages `ask` cannot make per question")
    return (f"`whoqa eval` measured the reader run {name} best for it: train its final model (`whoqa reader train "
            f"--final` with the run's options) to serve it")


class Service:
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
        self._readers: dict[str | None, object] = {}
        self._llms: dict[tuple[str, str], object] = {}
        self._fits: dict[str, object] = {}
        self._pools: dict[str, list] = {}
        self._cuts: dict[tuple[str, int], tuple] = {}
        self.stages = Stages()  # silent; the CLI shows them on a terminal (Stages(on=True))
        self._dense: OrderedDict[tuple[str, int], object] = OrderedDict()

    # --- books -------------------------------------------------------------------------------------------------
    def intake(self, text: str | Path | None = None, data: str | Path | None = None, book: str | None = None) -> str:
        """The id of the book asked about: a plain-text file (prepared the first time), a NarrativeQA folder's book
        (prepared the first time) or a prepared book's id."""
        from data_prep.addbook import add_from_data, add_text
        if (text is None) == (book is None):
            raise ValueError("name the book: --book ID (prepared, or with --data DIR) or --text FILE")
        with self.lock:
            if text is not None:
                book_id = add_text(self.ws, Path(text), stages=self.stages)
            elif data is not None:
                book_id = add_from_data(self.ws, Path(data), book)
            else:
                book_id = book
            self._opened.pop(book_id, None)  # (re)made: read afresh
            return book_id

    def resolve(self, book: str | Path) -> str:
        """The id of BOOK as a person names it: a book file (text, EPUB or HTML; processed the first time, the same
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

    # --- models ------------------------------------------------------------------------------------------------
    def network(self):
        from whoqa.memnet.ask import Asker
        if self._network is None:
            self.stages.stage("loading the memory network")
            self._network = Asker(self.ws, self.cfg.model, device=self.cfg.device)
        return self._network

    def llm(self, base: str, scores: bool, cfg: LLMConfig | None = None):
        """A local LLM, loaded once per (model, use, prompt): for name scores the runtime `scoring_runtime` picks (one
        that gives token probabilities), for answers the one LLMConfig chooses (whoqa.reader.runtimes), with cfg's
        prompt budget, answer length and prompt form."""
        from whoqa.reader.llm import LLMReader
        cfg = LLMConfig(prompt_tokens=RerankConfig.prompt_tokens) if scores else cfg or LLMConfig()
        key = (base, scores, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat, cfg.half)
        if key not in self._llms:
            self.stages.stage(f"loading the language model ({model_name(base)})")
            self._llms[key] = LLMReader(base, self.cfg.device, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat,
                                        cfg.half, self.scoring_runtime(base) if scores else cfg.runtime,
                                        scores=scores)
            self.stages.stage("answering")
        return self._llms[key]

    def scoring_runtime(self, base: str) -> str:
        """The runtime this service scores names with for an LLM (whoqa.reader.llm.scoring_runtime on its device)."""
        from whoqa.reader.llm import scoring_runtime
        return scoring_runtime(base, self.cfg.device)

    def fit(self, llm: str | None):
        from whoqa.ranker.fits import served_fit, shipped_fit
        key = llm or ""
        if key not in self._fits:
            self._fits[key] = served_fit(self.home, model_name(llm)) if llm else shipped_fit()
        return self._fits[key]

    def pool(self, who: bool) -> list[tuple[str, str, str]]:
        """Few-shot examples: the workspace's Who questions for name scores, all its questions for answers."""
        from whoqa.reader.llm import question_pool
        key = "who" if who else "all"
        if key not in self._pools:
            if who:
                from data_prep.who_set import load_who_set
                try:
                    self._pools[key] = [(q["question"], q["answer1"], q["document_id"])
                                        for q in load_who_set(self.home)[1]]
                except (FileNotFoundError, ValueError, KeyError):
                    self._pools[key] = []
            else:
                self._pools[key] = question_pool(self.home)
        return self._pools[key]

    # --- answers -----------------------------------------------------------------------------------------------
    def route(self, book_id: str, question: str, forced: str = "auto") -> Route:
        """The route, by the measurements of the workspace whose models serve (`fits_from`'s, for `eval --data`)."""
        return choose_route(self.home, book_id, question, self.cfg, forced)

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
            if key not in self._dense:
                if len(self._dense) >= KEEP_BOOKS:
                    self._dense.popitem(last=False)
                self._dense[key] = DenseIndex(book, self.ws.book_vectors(book.id), self._device())
            dense = self._dense[key]
        return passage_windows(opened, question, self.cfg.passages, dense)

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
        return Answer(question, book_id, "who", "network", "", f"memory network {net.model_name} "
                      f"({len(net.members)} member(s))", chars, evidence=self._evidence(book, context[:CONTEXT_SENTENCES],
                                                                                        chars, question),
                      attention=attention, calibration=got.calibration, warnings=got.warnings,
                      why=["a model trained on questions about this workspace's books chose it"]
                      + who_reasons(book, context[:CONTEXT_SENTENCES], chars, named_characters(spans)))

    def _features_answer(self, book_id: str, question: str, opened: tuple) -> Answer:
        from whoqa.ranker.features import CONTEXT_SENTENCES
        from whoqa.ranker.serve import rank
        spans, wins, context, warnings = self._who(book_id, question, opened)
        llm = installed_llm(self.cfg.llm)
        fit = self.fit(llm)
        reader = self.llm(llm, scores=True) if llm else None
        got = rank(fit.ranker, opened, question, spans, wins, reader, self.pool(who=True))
        book = opened[0]
        chars = [Ranked(i, book.characters[i].name, p, s)
                 for i, p, s in list(zip(got.ids, got.probabilities, got.llm))[:self.cfg.top]]
        r = fit.ranker
        model = (f"feature ranker + {llm} ({reader.runtime}) reading the passages for its top {r.top_k}" if llm else
                 "feature ranker, first stage (no local LLM)")
        calibration = {"by": "maximum likelihood on other books' questions", "fit": fit.where,
                       "fit_of": f"run {fit.measured_on}" if fit.measured_on else "the 41 shared books (shipped)",
                       "questions": r.questions, "ece": r.ece, "provenance": fit.provenance,
                       "stage": "both" if got.read else "first"}
        return Answer(question, book_id, "who", "features", "", model, chars,
                      evidence=self._evidence(book, context[:CONTEXT_SENTENCES], chars, question),
                      calibration=calibration, warnings=warnings,
                      why=who_reasons(book, context[:CONTEXT_SENTENCES], chars, named_characters(spans)))

    def _reader_answer(self, book_id: str, question: str, opened: tuple, model: str | None = None) -> Answer:
        from whoqa.reader.ask import ReaderAsker
        model = model or self.cfg.reader_model
        if model not in self._readers:
            self.stages.stage("loading the reader")
            self._readers[model] = ReaderAsker(self.ws, model, device=self.cfg.device)
        reader = self._readers[model]
        got = reader.ask(book_id, question, opened)
        # what it read (the stored contexts' recipe it trained on); a reader of no passage: the book's best passages
        wins = (self._windows(opened, question)[:len(got.passages)] if reader.passages else
                self._passage_windows(opened, question)[:LLMConfig.top_k])
        why = [f"a reader trained on other books' questions wrote it after reading the book's {len(got.passages)} "
               f"passage{'s' * (len(got.passages) != 1)} closest to your question"]
        return self._grounded(Answer(question, book_id, "reader", "reader", "", f"FiD reader {reader.model_name}",
                                     answer=got.answer, passages=got.passages, why=why), opened[0], wins, got.answer)

    def _llm_answer(self, book_id: str, question: str, opened: tuple, options: dict | None = None) -> Answer:
        """The installed LLM's answer, with the options of the LLM run the route measured (else LLMConfig's)."""
        from whoqa.reader.llm import answer_from_book
        llm = installed_llm(self.cfg.llm)
        if llm is None:
            raise FileNotFoundError("no local LLM installed: `bash install.sh` installs one")
        options = llm_answer_options(options or {})  # a record of another version: only the fields known here
        cfg = replace(LLMConfig(), **options)
        wins = self._passage_windows(opened, question)
        text, passages = answer_from_book(self.llm(llm, scores=False, cfg=cfg), opened, question,
                                          self.pool(who=False), cfg, wins)
        shown = "" if cfg == LLMConfig() else " (" + ", ".join(
            f"{k} {v}" for k, v in sorted(options.items()) if getattr(LLMConfig, k) != v) + ")"
        rouge = next((r for n, r, _ in MEASURED_LLMS if n == llm), None)
        why = ([f"a small language model ({model_name(llm)}) wrote it after reading the book's {len(passages)} "
                f"passage{'s' * (len(passages) != 1)} closest to your question"]
               + ([f"treat it as a rough guess: on test questions its answers share about {rouge:.0f}% of "
                   f"their wording with people's answers"] if rouge is not None else []))
        return self._grounded(Answer(question, book_id, "reader", "llm", "", f"{llm}, zero-shot{shown}", answer=text,
                                     passages=passages, why=why), opened[0], wins[:len(passages)], text)

    def _evidence(self, book, context: list[int], chars: list[Ranked], question: str) -> list[Evidence]:
        """The context sentences that mention the top character (by name or a resolved pronoun), those sharing the
        most of the question's words first (ties: the context's order), its mentions marked."""
        if not chars:
            return []
        best = chars[0].id
        asked = set(WORD.findall(question.lower())) - STOP
        found = []
        for rank_, s in enumerate(dict.fromkeys(context)):
            marks, text = sentence_marks(book, s, best)
            if marks:
                found.append((-len(asked & set(WORD.findall(text.lower()))), rank_, Evidence(s, text, marks)))
        return [e for *_, e in sorted(found, key=lambda x: x[:2])[:self.cfg.evidence]]


def who_reasons(book, context: list[int], chars: list[Ranked], named: set[int]) -> list[str]:
    """Why the top character, in a reader's words: the facts the feature ranker weighs (mentions near the question's
    words, its share of the book, the question naming it, the language model's pick), each as one clause."""
    if not chars:
        return []
    top = chars[0]
    near = sum(m.char_id == top.id for s in dict.fromkeys(context) for m in book.sentence_mentions(s))
    share = book.characters[top.id].count / max(1, sum(c.count for c in book.characters.values()))
    close = len(set(context))
    out = [f"{top.name} is mentioned {near} time{'s' * (near != 1)} in the {close} sentence{'s' * (close != 1)} "
           f"closest to your question" if close else "no sentence read shares a word with your question, so "
           "it goes by how often each character appears",
           f"{top.name} makes {share:.0%} of the mentions of people in the text read"]
    read = [c for c in chars if c.llm is not None]
    if read:
        pick = max(read, key=lambda c: c.llm)
        out.append(f"a language model that read those passages also picked {top.name}" if pick.id == top.id else
                   f"a language model that read those passages picked {pick.name}" + (
                       f", but the question names {pick.name}, and a question rarely asks about the one it names"
                       if pick.id in named else ""))
    passed = [c.name for c in chars[1:] if c.id in named]
    if passed and not read:
        out.append(f"the question names {', '.join(passed)}, and a question rarely asks about the one it names")
    return out


def sentence_marks(book, sid: int, char: int) -> tuple[list[tuple[int, int]], str]:
    """(offsets of `char`'s mentions, its cast's merged clusters' included, the sentence's text as the book spaces
    it: Book.sentence_text)."""
    from whoqa.ranker.cast import cast_of
    first, _ = book.sentences[sid]
    text, starts = book.sentence_text(sid)
    person = cast_of(book).of
    marks = [(starts[m.start - first], starts[m.end - first] + len(book.tokens[m.end].word))
             for m in book.sentence_mentions(sid) if m.char_id == char or person(m.char_id) == char]
    return marks, text


def check_question(question: str) -> str:
    """The question stripped; an empty one, one too long or one that is not valid text is a one-line ValueError."""
    question = (question or "").strip()
    if not question:
        raise ValueError("the question is empty: ask e.g. \"Who helps Emily escape?\"")
    if len(question) > 500:
        raise ValueError("the question is longer than 500 characters: ask one question")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the question holds a character that is not valid text (a lone surrogate): type it "
                         "again") from None
    return question
