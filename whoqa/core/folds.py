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


def who_book_folds(books_with_questions: set[str] | list[str], folds: int, seed: int) -> list[list[str]]:
    """Book-level CV's folds of the Who questions: the books that have usable questions in `folds` seeded groups (the
    same for every training seed). One rule for the memory network's `--by-book` runs and the feature ranker's."""
    books = sorted(set(books_with_questions))
    if len(books) < folds:
        raise ValueError(f"{len(books)} books with usable Who questions for {folds} book folds: use "
                         f"--folds {len(books)} or fewer")
    return book_folds(books, folds, seed)
