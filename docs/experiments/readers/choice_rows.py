"""Kept for the run that began with it: the rows are made by `whoqa choice-rows` (whoqa.ranker.choice_rows)."""
import argparse
from pathlib import Path

from whoqa.ranker.choice_rows import make_rows

ap = argparse.ArgumentParser()
ap.add_argument("--workspace", type=Path, required=True)
ap.add_argument("--out", type=Path, required=True)
ap.add_argument("--questions", type=Path)
ap.add_argument("--books", type=Path, default=Path("../shared/data/books-unlabeled"))
ap.add_argument("--written", type=Path)
a = ap.parse_args()
print(make_rows(a.workspace, a.out, a.questions, a.books, a.written), "rows in", a.out)
