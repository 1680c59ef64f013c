"""A cross-validated run's trials as one calibrated system, read from its fold files.

Each fold's trials are one ensemble (their temperature-scaled softmax averaged, `whoqa.core.calibration`); the
temperature of fold k is fit on the other folds' questions only, so the reported probabilities and their ECE are
out-of-sample. A single trial is judged the same way (members = 1). The temperature fit on every fold is what a
--final ensemble of the same recipe serves with.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from whoqa.core.calibration import Item, cross_fitted, probabilities
from whoqa.core.metrics import ranking_metrics


def _scores(p: dict) -> dict[int, float]:
    """character -> logit of one prediction (old fold files kept only the top probabilities: their logs)."""
    if "scores" in p:
        return dict(zip(p["ranking"], p["scores"]))
    return {c: float(np.log(max(x, 1e-12))) for c, x in zip(p["ranking"], p["probs"])}


def items(runs: list[dict], single: bool = False) -> list[Item]:
    """Calibration items of fold files' predictions: one per (fold, question) with the fold's trials as members, or
    (single) one per (fold, trial, question)."""
    grouped: dict = defaultdict(list)
    meta = {}
    for r in runs:
        for p in r["predictions"]:
            key = (r["fold"], r["trial"], p["question_id"]) if single else (r["fold"], p["question_id"])
            grouped[key].append(_scores(p))
            meta[key] = (r["fold"], p)
    out = []
    for key in sorted(grouped, key=str):
        members = grouped[key]
        fold, p = meta[key]
        chars = np.array(sorted(set().union(*members)), dtype=np.int64)  # (C,)
        scores = np.array([[m.get(int(c), -np.inf) for c in chars] for m in members])  # (members, C)
        out.append(Item(key, fold, chars, scores, np.isin(chars, p["answers"])))
    return out


def ensemble_rankings(its: list[Item], temperatures: list[float]) -> list[list[int]]:
    """Each item's characters by calibrated probability, best first."""
    out = []
    for it, t in zip(its, temperatures):
        p = probabilities(it.scores, t)
        out.append([int(it.chars[i]) for i in np.argsort(-p, kind="stable")])
    return out


FOLD_FILES = "fold*_trial*.json"  # a cross-validated run's results, one per fold and trial (written by memnet.train)


def read_fold_files(run_dir: Path) -> list[dict]:
    """A run's fold files, in order: the one reader of them (a damaged one is a one-line DamagedArtifact that
    `whoqa check` knows; an empty list when the run has none yet)."""
    from whoqa.core.artifacts import read_json
    repair = "run `whoqa check --repair` and the run's `whoqa train` again (only its missing folds are redone)"
    return [read_json(p, repair, dict) for p in sorted(Path(run_dir).glob(FOLD_FILES))]


def run_report(run_dir: Path) -> dict:
    """The run's ensemble metrics and the calibration of its ensemble and of its single trials."""
    runs = read_fold_files(run_dir)
    if not runs:
        return {}
    ens = items(runs)
    cal = cross_fitted(ens)
    temps = [cal["fold_temperatures"][str(i.group)] for i in ens]
    rankings = ensemble_rankings(ens, temps)
    answers = [[int(c) for c in i.chars[i.correct]] for i in ens]
    metrics = {k: v for k, v in ranking_metrics(rankings, answers).items() if k != "n"}
    single = cross_fitted(items(runs, single=True))
    return {"ensemble": {**metrics, "members": len({r["trial"] for r in runs}), "questions": len(ens),
                         "calibration": cal},
            "calibration": single}
