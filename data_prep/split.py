"""`whoqa split`: a held-out-books split of a NarrativeQA folder, for judging trained models on books they never saw.

Makes two NarrativeQA-layout folders of symbolic links (nothing copied):
    OUT/seen/     narrativeqa/*.csv, books/ = the other labelled books, books-unlabeled/ (all of them)
    OUT/unseen/   narrativeqa/*.csv, books/ = the held-out books
The csv files are the original ones, so question ids stay qaps.csv's row numbers; a book that is not in a folder is
simply not prepared there. The held-out books are a seeded sample of books/, so the same (data, n, seed) always
gives the same split; OUT/split.json lists them.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

from data_prep.narrativeqa import DataError, NarrativeQA
from whoqa.core.seed import SEED


def choose_heldout(book_ids: list[str], n: int, seed: int) -> list[str]:
    """n books of the sorted list, drawn with the seed (sorted again)."""
    if not 0 < n < len(book_ids):
        raise DataError(f"cannot hold out {n} of {len(book_ids)} labelled books: choose 1..{len(book_ids) - 1}")
    return sorted(random.Random(seed).sample(sorted(book_ids), n))


def _link(target: Path, link: Path) -> None:
    if link.is_symlink() or link.exists():
        if link.is_symlink() and Path(os.readlink(link)) == target:
            return
        raise DataError(f"{link} exists and is not the expected link: remove it or choose another --out")
    link.symlink_to(target)


HELDOUT = 10  # labelled books held out by default (about a quarter of the 41 shared books)


def split_books(data: str | Path, out: str | Path, heldout: int = HELDOUT, seed: int = SEED) -> dict:
    nqa = NarrativeQA(data)
    root = nqa.root.resolve()
    labelled = nqa.book_ids(unlabeled=False)
    held = choose_heldout(labelled, heldout, seed)
    seen = [b for b in labelled if b not in set(held)]
    out = Path(out)
    for name, ids in (("seen", seen), ("unseen", held)):
        folder = out / name
        (folder / "books").mkdir(parents=True, exist_ok=True)
        (folder / "narrativeqa").mkdir(exist_ok=True)
        for csv_name in ("documents.csv", "qaps.csv", "summaries.csv"):
            try:
                _link(nqa.csv_path(csv_name).resolve(), folder / "narrativeqa" / csv_name)
            except DataError:
                if csv_name != "summaries.csv":  # summaries only feed the BERT ranker's training
                    raise
        for b in ids:
            _link(nqa.book_path(b).resolve(), folder / "books" / f"{b}.txt")
        stale = {p.stem for p in (folder / "books").glob("*.txt")} - set(ids)
        if stale:
            raise DataError(f"{folder / 'books'} holds books of another split ({len(stale)}): use a new --out")
    if (root / "books-unlabeled").is_dir():
        _link(root / "books-unlabeled", out / "seen" / "books-unlabeled")
    record = {"data": str(root), "heldout": held, "seen": seen, "seed": seed,
              "rebuild": f"whoqa split --data {data} --out {out} --heldout {heldout} --seed {seed}"}
    (out / "split.json").write_text(json.dumps(record, indent=1))
    return record
