"""Baselines of Angelidis et al. Table 2: a random character, the book's most frequent character, and (once contexts
exist) the most frequent character of the selected context. Ties are broken by character id, so runs repeat."""
from __future__ import annotations

import random
from typing import Sequence

from whoqa.ranker.features import book_frequency  # noqa: F401  (the ranker's baseline too: defined there)


def random_ranking(characters: Sequence[dict], seed: int, question_id: int) -> list[int]:
    """A random order of the book's characters, fixed by (seed, question id)."""
    ids = sorted(c["id"] for c in characters)
    random.Random(f"{seed}:{question_id}").shuffle(ids)
    return ids


def context_frequency(context_mentions: Sequence[int], characters: Sequence[dict]) -> list[int]:
    """Characters by mentions in the selected context; the rest follow by book frequency."""
    counts: dict[int, int] = {}
    for c in context_mentions:
        counts[c] = counts.get(c, 0) + 1
    book_rank = {c: r for r, c in enumerate(book_frequency(characters))}
    return sorted(book_rank, key=lambda c: (-counts.get(c, 0), book_rank[c]))
