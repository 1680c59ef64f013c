"""The reader chooses: every person the read passages mention is a candidate, and the reader that writes answers
scores each one's name as the answer after one reading of the passages.

Why: a small reader writing free text over three windows loses the answer it has read (it writes the novel's central
figure, a role, or a name that belongs to nobody); asked to choose among the people those windows name, it is right
more often (docs/who-ranker.md). The prompt is the one the reader writes answers from (whoqa.llm.reader.reading), read
once; each name continues it in a sequence of its own (`LLMReader.name_scores`: the prompt's KV cache is shared by all
candidates), so twenty candidates cost about one reading.

Candidates: the cast's people (whoqa.ranker.cast) with a mention, by name or by a resolved pronoun, in a sentence of
the passages kept in the prompt; the ones the question names are left out unless it asks about itself ("Who does
Glenister love?" is not answered "Glenister"). Each is scored by up to ALIASES of its names (its cast name and its most
frequent other proper names: "Sir Henry", "Curtis"), the best of them standing for the person.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from whoqa.core.query import Query
from whoqa.llm.config import LLMConfig
from whoqa.ranker.cast import cast_of
from whoqa.ranker.model import log_softmax, softmax
from whoqa.retrieval.bm25f import Window, window_sentences

ALIASES = 3  # names scored per candidate: its cast name and its next most frequent proper names


@dataclass
class Choice:
    """The reader's scores of the people its passages name, for one question."""
    candidates: list[int]  # cast representatives, in the order the passages first mention them
    names: list[list[str]]  # per candidate, the names scored (its cast name first)
    scores: list[list[float]]  # per candidate and name: the name's log-likelihood as the whole answer (summed)
    tokens: list[list[int]]  # per candidate and name: its tokens
    sentences: list[int] = field(default_factory=list)  # the passage sentences read (what the candidates come from)
    mentions: list[int] = field(default_factory=list)  # per candidate: its mentions in those sentences
    extra: list[int] = field(default_factory=list)  # candidates scored though the passages do not mention them

    def best(self) -> list[float]:
        """Per candidate, its best name's log-likelihood."""
        return [max(s) for s in self.scores]

    def to_json(self) -> dict:
        return {"candidates": self.candidates, "names": self.names, "scores": self.scores, "tokens": self.tokens,
                "sentences": self.sentences, "mentions": self.mentions, "extra": self.extra}

    @classmethod
    def from_json(cls, d: dict) -> "Choice":
        return cls(d["candidates"], d["names"], d["scores"], d["tokens"], d.get("sentences", []),
                   d.get("mentions", []), d.get("extra", []))


def passage_people(book, sentences: list[int], query: Query) -> tuple[list[int], list[int]]:
    """(cast representatives mentioned in these sentences, by first mention; their mention counts there), without
    those the question names (unless it is reflexive)."""
    cast = cast_of(book)
    named = {cast.of(n) for n in query.named} - {None}
    seen: dict[int, int] = {}
    for s in sentences:
        for m in book.sentence_mentions(s):
            rep = cast.of(m.char_id)
            if rep is None or rep in named and not query.reflexive:
                continue
            seen[rep] = seen.get(rep, 0) + 1
    return list(seen), list(seen.values())


def candidate_names(book, rep: int, limit: int = ALIASES) -> list[str]:
    """The names a candidate is scored by: its cast name, then its person's most frequent other proper names (a
    person's clusters' aliases, by count), no two alike."""
    cast = cast_of(book)
    out = [cast.names.get(rep, book.characters[rep].name)]
    members = sorted(cast.groups.get(rep, [rep]), key=lambda c: -book.characters[c].count)
    for c in members:
        for a in book.characters[c].aliases:
            if len(out) >= limit:
                return out
            if a.lower() not in {o.lower() for o in out} and a[:1].isupper():
                out.append(a)
    return out


def reader_choice(reader, ob, query: Query, wins: list[Window], pool=(), cfg: LLMConfig = LLMConfig(),
                  also: list[int] = ()) -> Choice:
    """The reader's choice among the people of the passages it reads for `query` (`wins`: the question's passage
    windows, as the written answer reads them): one prompt, every candidate's names scored after it. `also`: people
    scored beside them though the passages do not mention them (the counts' favourites: a few names more after the
    same reading), listed after them. No passage matched: NothingMatched (whoqa.llm.reader.reading); no one to
    score: an empty Choice."""
    from whoqa.llm.reader import reading
    book = ob.book
    passages, starts, shots, listed = reading(ob, query, wins, pool, cfg)
    _, kept = reader.prompt(query.text, passages, shots, starts, cfg.order, listed)
    sentences = window_sentences(wins[:len(kept)])
    people, mentions = passage_people(book, sentences, query)
    named = {cast_of(book).of(n) for n in query.named} - {None}
    extra = [r for r in dict.fromkeys(also) if r not in people and (r not in named or query.reflexive)]
    people, mentions = people + extra, mentions + [0] * len(extra)
    names = [candidate_names(book, r) for r in people]
    flat = [n for ns in names for n in ns]
    if not flat:
        return Choice([], [], [], [], sentences, [], [])
    scored = reader.name_scores(query.text, passages, flat, shots, starts, cfg.order, characters=listed)
    tokens = [reader.count_tokens(n) for n in flat]
    scores, counts, k = [], [], 0
    for ns in names:
        scores.append([float(v) for v in scored[k:k + len(ns)]])
        counts.append(tokens[k:k + len(ns)])
        k += len(ns)
    return Choice(people, names, scores, counts, sentences, mentions, extra)


def passage_votes(reader, ob, query: Query, wins: list[Window], pool=(), cfg: LLMConfig = LLMConfig()) -> list[Choice]:
    """Each read passage on its own: per window the joint prompt keeps (`reader_choice`'s, in their rank), the
    reader's choice among the people that window mentions, after reading it alone (a short context: small readers
    lose an answer in a long mixed one). A window nothing in it matches gives an empty Choice."""
    from whoqa.llm.reader import reading
    from whoqa.retrieval.bm25f import NothingMatched
    passages, starts, shots, listed = reading(ob, query, wins, pool, cfg)
    _, kept = reader.prompt(query.text, passages, shots, starts, cfg.order, listed)
    out = []
    for w in wins[:len(kept)]:
        try:
            out.append(reader_choice(reader, ob, query, [w], pool, cfg))
        except NothingMatched:
            out.append(Choice([], [], [], []))
    return out


# --- one ranking of the cast from counting, choosing and writing ---------------------------------------------------
CLIP = -10.0  # nats below the best candidate: a name this unlikely says only "not this one"
CHOICE = ("in_passages", "choice", "choice_first", "passage_mentions", "written",  # what reading adds to the counts
          "votes", "vote_choice")  # (the last two: the passages read one by one, `passage_votes`)
VOTED = CHOICE[5:]  # reading's columns that need the passages read one by one
SERVED_READING = CHOICE[:4]  # reading's columns `ask` computes: one reading of the passages, every person scored


def _choice_of(ids: list[int], choice: Choice) -> tuple[np.ndarray, np.ndarray]:
    """(C,) the reader's choice of each of `ids` (its best name's log-likelihood, log-softmaxed over the people it
    scored, clipped at CLIP; 0 for one it did not score) and (C,) whether each is its first choice."""
    lsm, first = np.zeros(len(ids)), np.zeros(len(ids))
    if choice.candidates:
        best = np.array(choice.best())
        z = log_softmax(best)  # (K,)
        place = {c: k for k, c in enumerate(choice.candidates)}
        top = int(np.argmax(best))
        for j, c in enumerate(ids):
            if c in place:
                lsm[j], first[j] = max(float(z[place[c]]), CLIP), float(place[c] == top)
    return lsm, first


def choice_features(ids: list[int], choice: Choice, written: int | None = None,
                    votes: list[Choice] | None = None) -> np.ndarray:
    """(C, len(CHOICE)) reading's features of the cast `ids` (the counts' candidates, whoqa.ranker.features):
    whether the read passages mention c, the reader's choice of c (`_choice_of`), whether c is its first choice, c's
    mentions in the passages (log 1 +), whether the reader's written answer links to c first (`written`: that person,
    or None); with `votes` (the passages read one by one, best first): c's votes, each passage's first choice
    weighed by 1 / (1 + its rank), and c's best choice over the passages that name it."""
    x = np.zeros((len(ids), len(CHOICE)))  # (C, 7)
    if choice.candidates:
        place = {c: k for k, c in enumerate(choice.candidates)}
        x[:, 1], x[:, 2] = _choice_of(ids, choice)
        for j, c in enumerate(ids):
            if c in place:
                x[j, 0], x[j, 3] = float(c not in choice.extra), np.log1p(choice.mentions[place[c]])
    if written is not None:
        x[[j for j, c in enumerate(ids) if c == written], 4] = 1.0
    best = np.full(len(ids), -np.inf)  # (C,) c's best choice over the passages that name it
    for rank, vote in enumerate(votes or []):
        lsm, first = _choice_of(ids, vote)
        x[:, 5] += first / (1 + rank)
        best = np.where(np.isin(ids, vote.candidates), np.maximum(best, lsm), best)
    x[:, 6] = np.where(np.isfinite(best), best, 0.0)
    return x


@dataclass
class ChoiceRanker:
    """A conditional logit over the book's cast (whoqa.ranker.model.fit): the counts' features (whoqa.ranker.features)
    and reading's (CHOICE), p(c) = softmax_c(w . x_c), fit by maximum likelihood on other books' questions (its
    cross-validated ECE is recorded: on new books it is too sure, docs/who-ranker.md)."""
    weights: list[float]
    features: list[str]  # the counts' feature names, then CHOICE's, as the weights are ordered
    questions: int = 0
    source: str = ""
    ece: float | None = None
    reader: str | None = None  # the LLM whose choices and written answers it weighs (another reader's are refused)
    passages: str | None = None  # the passages' fusion those were read from (PassageConfig.fusion)
    also_top: int = 0  # the counts' first k people the reader also scores, named in the passages or not
    counts_weights: list[float] | None = None  # the weights over whoqa.ranker.features.SERVED that pick those k
    provenance: dict | None = None  # how it was made: the command, its rows' sha256, its measured figures

    def unserved(self) -> list[str]:
        """What this fit weighs that `ask` does not read (the written answer, the passages read one by one, the
        counts' favourites scored beside the passages' people: arms `whoqa fit-choice` measures, none shipped)."""
        from whoqa.ranker.features import SERVED
        return [f for f in self.features if f not in SERVED and f not in SERVED_READING] + (
            [f"the counts' first {self.also_top}"] if self.also_top else [])

    def counted_first(self, ids: list[int], x_served) -> list[int]:
        """The counts' first `also_top` people (x_served: (C, 5) their SERVED features)."""
        if not self.also_top or not self.counts_weights:
            return []
        order = np.argsort(-(np.asarray(x_served) @ np.array(self.counts_weights)), kind="stable")
        return [ids[j] for j in order[:self.also_top]]

    def probabilities(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(order (C,) best first, probabilities in that order) of candidates with features x (C, F)."""
        p = softmax(x @ np.array(self.weights))  # (C,)
        order = np.argsort(-p, kind="stable")
        return order, p[order]


SHIPPED_CHOICE = Path(__file__).with_name("reader_choice.json")  # the fit `ask` serves (`whoqa fit-choice` writes it)


def measured_fit_path(home, reader: str) -> Path:
    """Where `whoqa measure-reader` writes a reader's own choice ranking in a workspace (`home`: its Workspace)."""
    return Path(home.models) / "reader_choice" / f"{reader}.json"


def choice_fit_for(home, reader: str) -> ChoiceRanker | None:
    """The choice ranking that serves `reader` (a model_name): the one `whoqa measure-reader` measured for it in
    this workspace, else the shipped one (whose own reader the caller checks)."""
    return load_choice_fit(measured_fit_path(home, reader)) or load_choice_fit()


def load_choice_fit(path: Path = SHIPPED_CHOICE) -> ChoiceRanker | None:
    """The shipped choice ranking, None where there is none; a damaged file is a ValueError naming it and the fix.
    Read once per file version (every Who answer asks for it, twice)."""
    if not path.is_file():
        return None
    stat = path.stat()
    return _read_choice_fit(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read_choice_fit(path: Path, mtime_ns: int, size: int) -> ChoiceRanker:
    from whoqa.core.artifacts import read_json
    from whoqa.ranker.features import STAGE1
    d = read_json(path, "make it again with `whoqa fit-choice`", dict)
    try:
        fit = ChoiceRanker(**d)
    except TypeError as e:
        raise ValueError(f"{path} is not a choice ranking ({e}): make it again with `whoqa fit-choice`") from None
    unknown = [f for f in fit.features if f not in STAGE1 and f not in CHOICE]
    if unknown or len(fit.weights) != len(fit.features):
        raise ValueError(f"{path} weighs features whoqa does not build ({unknown}): make it again with "
                         f"`whoqa fit-choice`")
    return fit


def ranking_features(fit: ChoiceRanker, x_counts: np.ndarray, counted: list[str], reading: np.ndarray) -> np.ndarray:
    """(C, F) the fit's own columns from the counts' features (named `counted`) and reading's (CHOICE)."""
    cols = {n: x_counts[:, k] for k, n in enumerate(counted)} | {n: reading[:, k] for k, n in enumerate(CHOICE)}
    return np.column_stack([cols[f] for f in fit.features]) if fit.features else np.zeros((len(x_counts), 0))
