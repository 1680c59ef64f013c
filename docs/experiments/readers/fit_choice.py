"""Counting, choosing and writing as one fitted ranking of the cast (whoqa.ranker.reader_choice), judged by book-level CV on
the 254 NarrativeQA Who questions (fold seeds 13/14/15) and on the readers' check half, fit on the readers' fit half
with NarrativeQA's questions. Nothing here is chosen on the check half: arms are compared on CV (NarrativeQA's folds
with the readers' fit half's books as folds of their own) and the check half only reports.

    .venv/bin/python docs/experiments/readers/fit_choice.py --nqa docs/experiments/readers/rows_nqa.jsonl.gz \
        --readers docs/experiments/readers/rows_readers.jsonl.gz [--ship whoqa/ranker/choice.json --arm ARM]
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from whoqa.core.calibration import ece
from whoqa.core.folds import who_book_folds
from whoqa.evaluation.readers import load_split, name_words
from whoqa.ranker.reader_choice import CHOICE, Choice, ChoiceRanker, choice_features
from whoqa.ranker.model import fit

SEEDS = (13, 14, 15)
ARMS = {  # name -> (the counts' columns used, reading's columns used) or a rule
    "counts": (range(5), []),
    "counts+written": (range(5), [4]),
    "counts+choice": (range(5), [0, 1, 2, 3]),
    "counts+choice+written": (range(5), [0, 1, 2, 3, 4]),
    "counts+choice(no mentions)+written": (range(5), [0, 1, 2, 4]),
}
RULES = ("choice first", "written first")


def load(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [r for r in map(json.loads, f) if "error" not in r]


def right_of(r: dict) -> np.ndarray:
    """(C,) the right candidates: NarrativeQA's answer ids; a reader's question by shared name words (as `eval
    --questions` judges a ranking)."""
    if "right" in r:
        return np.array([i in set(r["right"]) for i in r["ids"]])
    accepted = set().union(*(name_words(a) for a in r["names_accepted"]))
    return np.array([bool(name_words(n) & accepted) for n in r["names"]])


def features(r: dict) -> np.ndarray:
    written = r["written"][0] if r.get("written") else None
    return np.column_stack([np.array(r["x"]), choice_features(r["ids"], Choice.from_json(r["choice"]), written)])


def ranked(r: dict, arm: str, w: np.ndarray | None) -> tuple[list[int], float]:
    """(candidate indices best first, the first one's probability) of one question by an arm."""
    x = features(r)
    if arm in RULES:
        counts = np.argsort(-(x[:, :5] @ w), kind="stable")  # (w: the counts' weights, fit)
        col = 7 if arm == "choice first" else 9
        first = [j for j in counts if x[j, col] == 1]
        order = first[:1] + [j for j in counts if j not in first[:1]]
        return order, float("nan")
    cols = list(ARMS[arm][0]) + [5 + c for c in ARMS[arm][1]]
    z = x[:, cols] @ w
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    return order.tolist(), float(p[order[0]])


def fit_arm(rows: list[dict], arm: str) -> np.ndarray:
    if arm in RULES:
        return fit([np.array(r["x"]) for r in rows], [right_of(r) for r in rows])
    cols = list(ARMS[arm][0]) + [5 + c for c in ARMS[arm][1]]
    return fit([features(r)[:, cols] for r in rows], [right_of(r) for r in rows])


def judged(rows: list[dict], got: list[tuple[list[int], float]]) -> dict:
    ranks = []
    for r, (order, _) in zip(rows, got):
        y = right_of(r)
        ranks.append(next((k + 1 for k, j in enumerate(order) if y[j]), None))
    n = len(rows)
    conf = np.array([p for _, p in got])
    hit = np.array([k == 1 for k in ranks], dtype=float)
    return {"n": n, "p@1": 100 * hit.mean(), "p@5": 100 * np.mean([k is not None and k <= 5 for k in ranks]),
            "mrr": float(np.mean([1 / k if k else 0 for k in ranks])),
            "ece": float(ece(conf, hit)) if not np.isnan(conf).any() else None}


def cv(nqa: list[dict], extra: list[dict], arm: str, seed: int) -> dict:
    """Book-level CV over NarrativeQA's books (10 folds of `seed`), the readers' fit-half rows `extra` always in the
    fit; judged on NarrativeQA's held-out folds."""
    groups = who_book_folds({r["book"] for r in nqa}, 10, seed)
    fold = {b: k for k, g in enumerate(groups) for b in g}
    got: list = [None] * len(nqa)
    for k in range(len(groups)):
        train = [r for r in nqa if fold[r["book"]] != k] + extra
        w = fit_arm(train, arm)
        for i, r in enumerate(nqa):
            if fold[r["book"]] == k:
                got[i] = ranked(r, arm, w)
    return judged(nqa, got)


def by_book_fit_half(nqa: list[dict], fit_half: list[dict], arm: str) -> dict:
    """The readers' fit half judged leave-one-book-out (fit on NarrativeQA and the other fit-half books)."""
    got = []
    for r in fit_half:
        w = fit_arm(nqa + [s for s in fit_half if s["book"] != r["book"]], arm)
        got.append(ranked(r, arm, w))
    return judged(fit_half, got)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nqa", type=Path, required=True)
    ap.add_argument("--readers", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("fit_choice.json"))
    ap.add_argument("--ship", type=Path, help="write the chosen arm's fit on every row here")
    ap.add_argument("--arm", default="counts+choice+written")
    a = ap.parse_args()
    nqa, readers = load(a.nqa), load(a.readers)
    for r in readers:
        r["names_accepted"] = r["names"] if "names_accepted" not in r else r["names_accepted"]
    split = load_split()
    fit_half = [r for r in readers if split.get(r["key"].split(":")[0]) == "fit"]
    check = [r for r in readers if r not in fit_half]
    table = {}
    for arm in list(ARMS) + list(RULES):
        seeds = {s: cv(nqa, fit_half, arm, s) for s in SEEDS}
        w = fit_arm(nqa + fit_half, arm)
        table[arm] = {"cv": {m: [seeds[s][m] for s in SEEDS] for m in ("p@1", "p@5", "mrr", "ece")},
                      "fit_half_by_book": by_book_fit_half(nqa, fit_half, arm),
                      "check": judged(check, [ranked(r, arm, w) for r in check])}
    a.out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{'arm':<38} {'CV P@1 (13/14/15)':<22} {'ECE':<6} | fit half P@1 P@5 | check P@1  P@5  MRR  ECE")
    for arm, t in table.items():
        c, f, k = t["cv"], t["fit_half_by_book"], t["check"]
        e = f"{np.mean(c['ece']):.3f}" if c["ece"][0] is not None else "  -  "
        ke = f"{k['ece']:.3f}" if k["ece"] is not None else "  -  "
        print(f"{arm:<38} {np.mean(c['p@1']):5.2f} ± {np.std(c['p@1']):4.2f}        {e}  | "
              f"{f['p@1']:5.1f} {f['p@5']:5.1f}  | {k['p@1']:5.1f} {k['p@5']:5.1f} {k['mrr']:.3f} {ke}  "
              f"(n {len(nqa)}/{f['n']}/{k['n']})")
    if a.ship:
        w = fit_arm(nqa + fit_half, a.arm)
        cols = list(ARMS[a.arm][0]) + [5 + c for c in ARMS[a.arm][1]]
        names = list(nqa[0]["features"]) + list(CHOICE)
        ranker = ChoiceRanker([float(v) for v in w], [names[c] for c in cols], len(nqa) + len(fit_half),
                              f"{len(nqa)} NarrativeQA Who questions and the readers' fit half ({len(fit_half)})",
                              round(float(np.mean(table[a.arm]["cv"]["ece"])), 3))
        a.ship.write_text(json.dumps(ranker.__dict__, indent=1) + "\n")


if __name__ == "__main__":
    main()
