"""What the service takes and gives: its settings, the Answer schema (one JSON for the CLI, the API and eval), and
the checks a request passes before any book is prepared or model loaded."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from whoqa.core.query import Query
from whoqa.llm.grounding import GroundingConfig
from whoqa.retrieval.passages import PassageConfig
from whoqa.service.routing import check_route


@dataclass
class ServiceConfig:
    device: str = "auto"  # where the models run: auto | cpu | cuda[:N]
    llm: str | None = None  # the local LLM that reads (Who name scores, other answers); None: the best installed;
    #                         "none": no LLM (Who questions by the feature ranker's first stage)
    model: str | None = None  # memory network under WS/models (None: the best cross-validated)
    reader_model: str | None = None  # FiD reader under WS/models/reader (None: the best cross-validated)
    top: int = 5  # characters in a Who answer
    reading: bool = True  # Who: the reader writes the answer where the fit reads one (False: counting alone, about
    #                       4x faster; docs/who-ranker.md, "Reading and counting")
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
class Ranked:
    id: int
    name: str
    probability: float | None  # calibrated; None where no calibration holds for this book
    llm: float | None = None  # the LLM's own share among the names it read (feature ranker)


def one_per_name(ranked: list[Ranked], top: int) -> list[Ranked]:
    """The first `top` of a ranking with no name twice: a character listed under a name already shown (two clusters
    of one person, e.g. the same detective found twice) adds its probability and LLM share to the first one."""
    out: dict[str, Ranked] = {}
    for r in ranked:
        key = r.name.lower()
        if key not in out:
            out[key] = Ranked(r.id, r.name, r.probability, r.llm)
            continue
        first = out[key]
        if first.probability is not None and r.probability is not None:
            first.probability += r.probability
        if r.llm is not None:
            first.llm = (first.llm or 0.0) + r.llm
    folded = list(out.values())
    if all(r.probability is not None for r in folded):
        folded.sort(key=lambda r: -r.probability)  # (stable: a name that gained keeps its place among equals)
    return folded[:top]


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
    reason: str = ""  # why this route (the service's routing fills it in: Service.answer)
    model: str = ""  # what answered
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


@dataclass
class CastRanking:
    """A Who route's ranking of the cast, before it is explained (whoqa.service.who.who_answer builds the Answer
    from it once): what every Who ranking gives, whatever read it."""
    route: str  # the route's name (its scorer's)
    model: str  # what ranked, in words
    characters: list[Ranked]  # best first
    calibration: dict | None = None  # where the probabilities' scale comes from (None: no probability)
    why: list[str] = field(default_factory=list)  # what the ranking read and chose, before the counts' reasons
    read: list[int] = field(default_factory=list)  # the sentences it read: the evidence is looked for there first
    lead: Evidence | None = None  # a sentence shown first (the one the reader's written answer came from)
    says_reading: bool = True  # the counts' reasons also say what a reader that scored names picked
    attention: list[Evidence] = field(default_factory=list)  # the network's most attended sentences
    warnings: list[str] = field(default_factory=list)


def check_request(question: str | Query, route: str, cfg: ServiceConfig) -> Query:
    """The question (checked and read once: Query.ask), route and settings checked before any work: `ask --text`
    prepares no book for a question, route or --top that would be refused after. One-line ValueError."""
    query = Query.ask(question)
    check_route(query.kind, route)
    cfg.check()
    return query
