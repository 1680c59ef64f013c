"""A question's features for each of a book's characters: one registry, read by cross-validation (the stored BM25F
contexts) and by serving (fresh ones, the same recipe: `whoqa.retrieval.bm25f.question_windows`).

Each feature is a name and a function of `Inputs` giving one number per character; a fit records the registry's
names and FEATURE_VERSION, and a fit made with other features is refused (`whoqa.ranker.fits`). Adding a feature is
one entry here (bump the version when a definition changes).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np

FEATURE_VERSION = 1
CONTEXT_SENTENCES = 100  # the question's BM25F context, as the memory network reads it (MemNetConfig's memories)


@dataclass
class Inputs:
    """What the features read, per character of the book (C of them, in the book's order)."""
    counts: np.ndarray  # (C,) mentions in the whole book
    context: np.ndarray  # (C,) mentions in the question's context (its first CONTEXT_SENTENCES sentences)
    named: np.ndarray  # (C,) bool: the question names the character


FEATURES: dict[str, Callable[[Inputs], np.ndarray]] = {
    # log of the character's share of the book's character mentions (book frequency, as a feature)
    "book_share": lambda i: np.log(np.maximum(i.counts, 1) / max(i.counts.sum(), 1)),
    # log(1 + its mentions in the question's BM25F context)
    "context_mentions": lambda i: np.log1p(i.context),
    # the question itself names it (who is then rarely the answer: "Who does Glenister love?")
    "named": lambda i: i.named.astype(float),
}
STAGE1 = tuple(FEATURES)
STAGE2 = STAGE1 + ("llm",)


def character_features(characters: list[dict], context: Counter, named: set[int]) -> tuple[list[int], np.ndarray]:
    """(ids, (C, F) stage-1 features) of characters given as records with an id and a count (the book's order), the
    question's context mentions (character id -> count) and the characters the question names."""
    ids = [c["id"] for c in characters]
    inputs = Inputs(np.array([c["count"] for c in characters], dtype=float),
                    np.array([context[i] for i in ids], dtype=float), np.array([i in named for i in ids]))
    x = np.column_stack([f(inputs) for f in FEATURES.values()]) if ids else np.zeros((0, len(FEATURES)))
    return ids, x.reshape(-1, len(FEATURES))  # (C, F)


def book_features(book, context: list[int], named: set[int]) -> tuple[list[int], np.ndarray]:
    """(ids, (C, F) features) of a book's characters for a question whose context holds these sentence ids (best
    first; the first CONTEXT_SENTENCES are read) and which names these characters."""
    mentions = Counter(m.char_id for s in context[:CONTEXT_SENTENCES] for m in book.sentence_mentions(s))
    return character_features([{"id": c.id, "count": c.count} for c in book.characters.values()], mentions, named)
