"""Seeded k-fold splits. Folds are drawn over books for everything trained on a book's text (a book is never scored by
a model that saw it), and over questions where the paper does so (the memory network's 10-fold Who set)."""
from __future__ import annotations

import random


def index_folds(n: int, k: int, seed: int) -> list[list[int]]:
    """k folds of the indices 0..n-1, each sorted."""
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    return [sorted(idx[f::k]) for f in range(k)]


def book_folds(book_ids: list[str], folds: int, seed: int) -> list[list[str]]:
    """`folds` groups of book ids (at least one), the same for the same set of books whatever their order."""
    ids = sorted(book_ids)
    random.Random(seed).shuffle(ids)
    return [ids[k::folds] for k in range(max(1, folds))]
