"""Issue 52, the span arm judged: from span_arm.py's records, each question's answer written by the 0.5B (as `ask`
writes it) against the passage span it scores highest, the score being the span's token log-probabilities summed and
divided by len^alpha (alpha 0: the sum, short spans win; 1: the mean, long spans win). alpha is chosen on other
books: book-level 2-fold cross-fitting (books sorted by id, alternately in fold 0 and 1; each fold's answers use the
alpha best on the other fold), and every alpha is shown too.

    .venv/bin/python docs/experiments/grounded-answers/span_judge.py --records F.jsonl.gz [--out span_arm.json]
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from whoqa.core.metrics import paired_book_bootstrap, rouge_l, normalize_text, text_metrics

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.open(path, "rt")]


def chosen(row: dict, alpha: float) -> str:
    cands = [(sum(lps) / len(lps) ** alpha, text) for text, lps in row["candidates"] if lps]
    return max(cands)[1] if cands else row["written"]


def metrics(rows: list[dict], answers: list[str]) -> dict:
    m = text_metrics(answers, [r["answers"] for r in rows])
    return {k: round(m[k], 2) for k in ("rouge_l", "meteor", "bleu_1")}


def per_question(rows, answers):
    return [[100 * rouge_l(normalize_text(a), [normalize_text(g) for g in r["answers"]])] for r, a in zip(rows, answers)]


def cross_fitted(rows: list[dict]) -> tuple[list[str], dict]:
    """Each question's span with the alpha chosen on the other fold's books (ROUGE-L), and the alphas chosen."""
    books = sorted({r["book"] for r in rows})
    fold = {b: i % 2 for i, b in enumerate(books)}
    chosen_alpha = {}
    for f in (0, 1):
        other = [r for r in rows if fold[r["book"]] != f]
        chosen_alpha[f] = max(ALPHAS, key=lambda x: metrics(other, [chosen(r, x) for r in other])["rouge_l"])
    return [chosen(r, chosen_alpha[fold[r["book"]]]) for r in rows], chosen_alpha


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("span_arm.json"))
    a = ap.parse_args()
    rows = rows_of(a.records)
    span, alphas = cross_fitted(rows)
    written = [r["written"] for r in rows]
    out = {"records": str(a.records), "questions": len(rows), "books": len({r["book"] for r in rows}),
           "alpha chosen on the other fold's books": alphas,
           "written (as ask writes it)": metrics(rows, written),
           "span, alpha cross-fitted": metrics(rows, span),
           "span minus written, ROUGE-L, 95% over books": paired_book_bootstrap(
               per_question(rows, span), per_question(rows, written), [r["book"] for r in rows],
               ["rouge_l"])["difference"]["rouge_l"],
           "every alpha (not a result: chosen on these books)": {
               str(x): metrics(rows, [chosen(r, x) for r in rows]) for x in ALPHAS}}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
