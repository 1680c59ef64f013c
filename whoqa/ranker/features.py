"""A question's features for each of a book's answer candidates: one registry, read by cross-validation (the stored
BM25F contexts) and by serving (fresh ones, the same recipe: `whoqa.retrieval.bm25f.question_windows`).

The candidates are the book's cast (`whoqa.ranker.cast`: people only, a person's clusters merged, each counting its
members' mentions), or, with `cast=False`, every character cluster as `prepare` made them (the ablation).

Each feature is a name and a function of `Inputs` giving one number per character; a fit records the features it
uses (all of the registry's or some), whether its candidates are the cast, and FEATURE_VERSION; a fit naming a
feature the registry lacks, or made with another version, is refused (`whoqa.ranker.fits`). Adding a feature is one
entry here (bump the version when a definition changes).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np

from whoqa.core.query import Query
from whoqa.core.syntax import question_roles
from whoqa.ranker.cast import cast_of

FEATURE_VERSION = 1  # the definitions' version (features added since keep it: a fit names the ones it uses)
CONTEXT_SENTENCES = 100  # the question's BM25F context, as the memory network reads it (MemNetConfig's memories)


def book_frequency(characters) -> list[int]:
    """Characters (records with id and count) by mention count in the book, most frequent first (ties by id): the
    baseline, and the order the ranker's judging compares with."""
    return [c["id"] for c in sorted(characters, key=lambda c: (-c["count"], c["id"]))]


@dataclass
class Inputs:
    """What the features read, per character of the book (C of them, in the book's order)."""
    counts: np.ndarray  # (C,) mentions in the whole book
    context: np.ndarray  # (C,) mentions in the question's context (its first CONTEXT_SENTENCES sentences)
    named: np.ndarray  # (C,) bool: the question names the character
    roles: np.ndarray  # (C, 2): its mentions in the context playing the question's role for its verb, and of those
    #                    the ones in a sentence holding another of the question's arguments (whoqa.core.syntax)
    book_roles: np.ndarray  # (C, 2): the same over every sentence of the book holding one of the question's verbs
    network: np.ndarray  # (C,) the anonymous-slot memory network's log-probability (whoqa.memnet.slots; 0: none)
    written: np.ndarray  # (C,) where the reader's written answer names it (whoqa.ranker.written): 1 first, 2 next..., 0


FEATURES: dict[str, Callable[[Inputs], np.ndarray]] = {
    # log of the character's share of the book's character mentions (book frequency, as a feature)
    "book_share": lambda i: np.log(np.maximum(i.counts, 1) / max(i.counts.sum(), 1)),
    # log(1 + its mentions in the question's BM25F context)
    "context_mentions": lambda i: np.log1p(i.context),
    # the question itself names it (who is then rarely the answer: "Who does Glenister love?")
    "named": lambda i: i.named.astype(float),
    # log(1 + its mentions doing what the question asks of "who": "Who swears to kill Dorian?" -> subject of swear)
    "role": lambda i: np.log1p(i.roles[:, 0]),
    # the same, in a sentence that also holds another argument of the question (a character it names, a content word)
    "role_with_args": lambda i: np.log1p(i.roles[:, 1]),
    # the same two over the whole book: every sentence with one of the question's verbs, wherever the context did not
    #   reach ("Who swears to kill Dorian?": anyone the book has swear or kill with Dorian near)
    "book_role": lambda i: np.log1p(i.book_roles[:, 0]),
    "book_role_with_args": lambda i: np.log1p(i.book_roles[:, 1]),
    # the memory network over anonymous slots: how likely it finds the character the answer, having read the context
    "network": lambda i: i.network,
    # the reader, asked to write the answer from the passages it reads for other questions, named it first
    "written": lambda i: (i.written == 1).astype(float),
    # ... or named it at all (a second name it wrote)
    "written_any": lambda i: (i.written >= 1).astype(float),
}
STAGE1 = tuple(FEATURES)  # every feature the registry computes; a fit uses these or some of them (its own list)
FROM_BOOK = tuple(f for f in STAGE1 if f not in ("network", "written", "written_any"))  # what the book and question
#   alone give ("--stage1 all"); the network's needs a trained slot network (`whoqa slots train`), the written ones a
#   reader's written answers (`whoqa.ranker.written`)
WRITTEN = ("written", "written_any")
BASE = ("book_share", "context_mentions", "named")  # issue 29's three: a fit that records no feature list used these
SERVED = BASE + ("book_role", "book_role_with_args")  # the served fit's, over the book's cast: measured best with the
#   LLM (docs/who-ranker.md#a-cast-of-people-and-the-questions-syntax)


def character_features(characters: list[dict], context: Counter, named: set[int],
                       roles: dict[int, list[int]] | None = None,
                       book_roles: dict[int, list[int]] | None = None,
                       network: dict[int, float] | None = None,
                       written: list[int] | None = None) -> tuple[list[int], np.ndarray]:
    """(ids, (C, F) stage-1 features) of candidates given as records with an id and a count (the book's order), the
    question's context mentions (id -> count), the candidates the question names, their role matches in the context and
    in the whole book (id -> [matches, matches beside another argument]), the network's log-probabilities (id -> value; a candidate it
    did not score gets the lowest it gave) and the candidates the reader's written answer names, in order."""
    ids = [c["id"] for c in characters]
    place = {r: k + 1 for k, r in reversed(list(enumerate(written or [])))}  # (the first place a name is written)
    roles, book_roles, network = roles or {}, book_roles or {}, network or {}
    low = min(network.values(), default=0.0)
    inputs = Inputs(np.array([c["count"] for c in characters], dtype=float),
                    np.array([context[i] for i in ids], dtype=float), np.array([i in named for i in ids]),
                    np.array([roles.get(i, [0, 0]) for i in ids], dtype=float).reshape(-1, 2),
                    np.array([book_roles.get(i, [0, 0]) for i in ids], dtype=float).reshape(-1, 2),
                    np.array([network.get(i, low) for i in ids], dtype=float),
                    np.array([place.get(i, 0) for i in ids], dtype=float))
    x = np.column_stack([f(inputs) for f in FEATURES.values()]) if ids else np.zeros((0, len(FEATURES)))
    return ids, x.reshape(-1, len(FEATURES))  # (C, F)


def candidates(book, cast: bool = True) -> dict[int, list[int]]:
    """The answer candidates of a book: representative id -> the character ids it stands for."""
    if cast:
        return cast_of(book).groups
    return {c: [c] for c in book.characters}


def first_written(book, ids: list[int], written: list[int] | None, cast: bool = True) -> int | None:
    """The index in `ids` (the candidates) of the first character the reader's written answer names, None when it
    names none of them: what a fit with `written_first` puts first."""
    rep = {m: r for r, ms in candidates(book, cast).items() for m in ms}
    place = {r: j for j, r in enumerate(ids)}
    return next((place[rep[w]] for w in written or () if w in rep and rep[w] in place), None)


def answer_ids(book, answers, cast: bool = True) -> list[int]:
    """A question's right character ids as candidates: each through its person's representative (a character that is
    not a person stays itself, so no candidate is right for it)."""
    if not cast:
        return sorted(answers)
    c = cast_of(book)
    return sorted({c.of(a) if c.of(a) is not None else a for a in answers})


def columns(names) -> list[int]:
    """The registry's columns of these feature names (a fit's own list)."""
    return [STAGE1.index(n) for n in names]


ROLE_FEATURES = ("role", "role_with_args", "book_role", "book_role_with_args")  # the ones that parse the question


def book_features(book, context: list[int], named: set[int], query: Query | None = None, cast: bool = True,
                  network: dict[int, float] | None = None, used: tuple[str, ...] = STAGE1,
                  written: list[int] | None = None,
                  roles: tuple[dict, dict] | None = None) -> tuple[list[int], np.ndarray]:
    """(ids, (C, F) features) of a book's answer candidates for a question whose context holds these sentence ids
    (best first; the first CONTEXT_SENTENCES are read) and which names these characters; `network`: the slot
    network's log-probability per character id (a person's: its clusters' summed). `used`: the features a fit reads;
    the question is parsed only for role features among them (the parse and WordNet's import cost a first answer
    about 2.5 s), the others' columns left 0. `written`: the character ids the reader's written answer names, in
    order (`whoqa.ranker.written.Written.linked`). `roles`: the question's role matches where the caller has them
    (whoqa.core.syntax.question_roles over these sentences, through the cast), else matched here."""
    groups = candidates(book, cast)
    rep = {m: r for r, ms in groups.items() for m in ms}
    sentences = context[:CONTEXT_SENTENCES]
    mentions = Counter(rep[m.char_id] for s in sentences for m in book.sentence_mentions(s) if m.char_id in rep)
    roles = roles if cast else None  # (the caller's are matched through the cast)
    frame = query.frame if roles is None and query is not None and set(used) & set(ROLE_FEATURES) else None
    records = [{"id": r, "count": sum(book.characters[m].count for m in ms)} for r, ms in groups.items()]
    if network:
        scored = {r: [network[m] for m in ms if m in network] for r, ms in groups.items()}
        network = {r: float(np.logaddexp.reduce(v)) for r, v in scored.items() if v}
    written = list(dict.fromkeys(rep[w] for w in written or () if w in rep))
    return character_features(records, mentions, {rep[n] for n in named if n in rep},
                              *(roles or question_roles(book, sentences, frame, named, rep.get)), network, written)
