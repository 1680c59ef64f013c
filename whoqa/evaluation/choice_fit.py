"""Counting, choosing and writing as one fitted ranking of the cast (whoqa.ranker.reader_choice.ChoiceRanker), fit and
judged on the rows `whoqa choice-rows` makes (`whoqa fit-choice`).

Judged two ways, nothing chosen on the readers' check half:
- book-level CV on NarrativeQA's Who questions (10 book folds, fold seeds 13/14/15), the readers' fit half always in
  the fit;
- the readers' fit half leave-one-book-out (fit on NarrativeQA and the other fit-half books): where arms are
  compared on readers' questions;
- the readers' check half (data_prep/readers/split.tsv), fit on everything else: reported only.
Arms: a conditional logit over the counts' features with reading's (ARMS), and two rules for comparison (RULES).
The shipped fit is one arm's, on NarrativeQA's questions and the readers' fit half, with its provenance.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np

from whoqa.core.calibration import ece
from whoqa.core.folds import who_book_folds
from whoqa.evaluation.readers import load_split, name_words
from whoqa.llm.registry import chooser
from whoqa.ranker.model import fit
from whoqa.ranker.reader_choice import CHOICE, SHIPPED_CHOICE, VOTED, Choice, ChoiceRanker, choice_features

SEEDS = (13, 14, 15)
COUNTS = 5  # the counts' columns of a row (whoqa.ranker.features.SERVED)
ARMS = {  # name -> reading's columns (CHOICE's indices) beside the counts' five
    "counts": [],
    "counts+written": [4],
    "counts+choice": [0, 1, 2, 3],
    "counts+choice+written": [0, 1, 2, 3, 4],
    "counts+votes": [0, 3, 5, 6],  # (the votes' arms: rows with votes, `whoqa choice-rows --votes`)
    "counts+choice+votes": [0, 1, 2, 3, 5, 6],
    "counts+choice+votes+written": [0, 1, 2, 3, 4, 5, 6],
}
RULES = ("choice first", "written first")  # the reader's choice (or written answer) first, the counts order the rest
SERVED_ARM = "counts+choice"  # what `fit-choice` ships by default
READERS_WEIGHT = 6  # each readers' fit-half question counts this many times in a fit beside NarrativeQA's (chosen
#                    on the fit half, leave one book out: 1, 3, 6, 12 measured; docs/who-ranker.md)


def file_digest(path: Path) -> str:
    """The file's whole sha256 (what a reproduction names its data by)."""
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_rows(path: Path, votes: Path | None = None) -> list[dict]:
    """A rows file's answered questions (a question nothing in the book matched is left out), each with its votes
    from `votes` (`whoqa choice-rows --votes`; a question it lacks is a ValueError: finish that file first)."""
    from whoqa.core.artifacts import read_rows
    for f in (path, votes):
        if f is not None and not Path(f).is_file():
            raise FileNotFoundError(f"{f} not found: make it with `whoqa choice-rows`")
    rows = [r for r in read_rows(path) if "error" not in r]
    if votes is not None:
        got = {v["key"]: v["votes"] for v in read_rows(votes) if "votes" in v}
        missing = [r["key"] for r in rows if r["key"] not in got]
        if missing:
            raise ValueError(f"{votes} lacks the votes of {len(missing)} of {path}'s questions: finish it with "
                             f"`whoqa choice-rows --votes --out {votes}` (it resumes)")
        rows = [{**r, "votes": got[r["key"]]} for r in rows]
    return rows


def right_of(r: dict) -> np.ndarray:
    """(C,) the right candidates: NarrativeQA's answer ids; a reader's question by shared name words, as `eval
    --questions` judges a ranking (whoqa.evaluation.readers.who_rank)."""
    if "right" in r:
        return np.array([i in set(r["right"]) for i in r["ids"]])
    accepted = set().union(*(name_words(a) for a in r["names"]))
    return np.array([bool(name_words(n) & accepted) for n in r["names_cast"]])


def features(r: dict) -> np.ndarray:
    """(C, 5 + len(CHOICE)) a row's counts' features and reading's."""
    written = r["written"][0] if r.get("written") else None
    votes = [Choice.from_json(v) for v in r["votes"]] if "votes" in r else None
    return np.column_stack([np.array(r["x"]), choice_features(r["ids"], Choice.from_json(r["choice"]), written,
                                                              votes)])


def _cols(arm: str) -> list[int]:
    return list(range(COUNTS)) + [COUNTS + c for c in ARMS[arm]]


def fit_arm(rows: list[dict], arm: str) -> np.ndarray:
    """An arm's maximum-likelihood weights on these rows (a rule's: the counts' alone)."""
    cols = list(range(COUNTS)) if arm in RULES else _cols(arm)
    return fit([features(r)[:, cols] for r in rows], [right_of(r) for r in rows])


def ranked(r: dict, arm: str, w: np.ndarray, temperature: float = 1.0) -> tuple[list[int], float]:
    """(candidate indices best first, the first one's probability; NaN for a rule) of one question by an arm."""
    x = features(r)
    if arm in RULES:
        counts = np.argsort(-(x[:, :COUNTS] @ w), kind="stable").tolist()
        col = COUNTS + CHOICE.index("choice_first" if arm == "choice first" else "written")
        first = [j for j in counts if x[j, col] == 1][:1]
        return first + [j for j in counts if j not in first], float("nan")
    z = x[:, _cols(arm)] @ w / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    return order.tolist(), float(p[order[0]])


def judged(rows: list[dict], got: list[tuple[list[int], float]]) -> dict:
    """P@1, P@5, MRR (a question whose answer is no candidate counts as missed) and ECE of the first's probability."""
    ranks = []
    for r, (order, _) in zip(rows, got):
        y = right_of(r)
        ranks.append(next((k + 1 for k, j in enumerate(order) if y[j]), None))
    if not rows:
        return {"n": 0, "p@1": float("nan"), "p@5": float("nan"), "mrr": float("nan"), "ece": None, "ranks": []}
    conf = np.array([p for _, p in got])
    hit = np.array([k == 1 for k in ranks], dtype=float)
    return {"n": len(rows), "p@1": round(100 * float(hit.mean()), 2),
            "p@5": round(100 * float(np.mean([k is not None and k <= 5 for k in ranks])), 2),
            "mrr": round(float(np.mean([1 / k if k else 0 for k in ranks])), 3),
            "ece": None if np.isnan(conf).any() else round(float(ece(conf, hit)), 3),
            "ranks": ranks}


def cv(nqa: list[dict], extra: list[dict], arm: str, seed: int, temperature: float = 1.0,
       weight: int = READERS_WEIGHT) -> dict:
    """Book-level CV over NarrativeQA's books (10 folds of `seed`), `extra` (the readers' fit half, each `weight`
    times) always in the fit; judged on NarrativeQA's held-out folds."""
    groups = who_book_folds({r["book"] for r in nqa}, 10, seed)
    fold = {b: k for k, g in enumerate(groups) for b in g}
    got: list = [None] * len(nqa)
    for k in range(len(groups)):
        w = fit_arm([r for r in nqa if fold[r["book"]] != k] + extra * weight, arm)
        for i, r in enumerate(nqa):
            if fold[r["book"]] == k:
                got[i] = ranked(r, arm, w, temperature)
    return judged(nqa, got)


def leave_one_book_out(nqa: list[dict], half: list[dict], arm: str, temperature: float = 1.0,
                       weight: int = READERS_WEIGHT) -> dict:
    """The readers' fit half, each book judged by a fit on NarrativeQA and the half's other books."""
    got = []
    for book in sorted({r["key"].split(":")[0] for r in half}):
        w = fit_arm(nqa + [s for s in half if s["key"].split(":")[0] != book] * weight, arm)
        got += [(r, ranked(r, arm, w, temperature)) for r in half if r["key"].split(":")[0] == book]
    return judged([r for r, _ in got], [g for _, g in got])


def fit_temperature(nqa: list[dict], half: list[dict], arm: str, weight: int = READERS_WEIGHT) -> float:
    """The temperature (one scalar dividing the weights) that maximises the likelihood of the right candidates in
    out-of-fold predictions: NarrativeQA's book folds (seed 13) and the fit half left out book by book, its
    questions counted `weight` times. Book-level folds make a maximum-likelihood fit too sure on a new book."""
    from scipy.optimize import minimize_scalar
    if arm in RULES:
        return 1.0
    z_y = []  # (scores over candidates, right mask, weight) of each held-out question
    groups = who_book_folds({r["book"] for r in nqa}, 10, SEEDS[0])
    fold = {b: k for k, g in enumerate(groups) for b in g}
    for k in range(len(groups)):
        w = fit_arm([r for r in nqa if fold[r["book"]] != k] + half * weight, arm)
        z_y += [(features(r)[:, _cols(arm)] @ w, right_of(r), 1) for r in nqa if fold[r["book"]] == k]
    for book in sorted({r["key"].split(":")[0] for r in half}):
        w = fit_arm(nqa + [s for s in half if s["key"].split(":")[0] != book] * weight, arm)
        z_y += [(features(r)[:, _cols(arm)] @ w, right_of(r), weight) for r in half
                if r["key"].split(":")[0] == book]
    z_y = [(z, y, n) for z, y, n in z_y if y.any()]

    def nll(t):
        total = 0.0
        for z, y, n in z_y:
            s = z / t - (z / t).max()
            total -= n * (np.log(np.exp(s)[y].sum()) - np.log(np.exp(s).sum()))
        return total
    return float(minimize_scalar(nll, bounds=(0.2, 10.0), method="bounded").x)


def halves(readers: list[dict], split: Path | None = None) -> tuple[list[dict], list[dict]]:
    """The readers' rows of the fit half and of the check half (by the split's book ids; default the shipped
    split, data_prep/readers/split.tsv)."""
    split = load_split(split) if split is not None else load_split()
    fit_half = [r for r in readers if split.get(r["key"].split(":")[0]) == "fit"]
    return fit_half, [r for r in readers if split.get(r["key"].split(":")[0]) == "check"]


def measure(nqa: list[dict], readers: list[dict], weight: int = READERS_WEIGHT) -> dict:
    """Every arm: CV over seeds, the fit half leave-one-book-out, the check half (the fit on everything else), with
    the arm's temperature (`fit_temperature`, from NarrativeQA and the fit half only)."""
    fit_half, check = halves(readers)
    table = {}
    voted = all("votes" in r for r in nqa + readers)
    for arm in [a for a in ARMS if voted or not {CHOICE[c] for c in ARMS[a]} & set(VOTED)] + list(RULES):
        t = fit_temperature(nqa, fit_half, arm, weight)
        seeds = {s: cv(nqa, fit_half, arm, s, t, weight) for s in SEEDS}
        w = fit_arm(nqa + fit_half * weight, arm)
        table[arm] = {"temperature": round(t, 3), "readers_weight": weight,
                      "cv": {m: [seeds[s][m] for s in SEEDS] for m in ("p@1", "p@5", "mrr", "ece")},
                      "fit_half": leave_one_book_out(nqa, fit_half, arm, t, weight),
                      "check": judged(check, [ranked(r, arm, w, t) for r in check])}
    return table


def lines(table: dict) -> list[str]:
    """The table as text: CV mean ± sd over the fold seeds, the fit half, the check half."""
    out = [f"{'arm':<24} {'T':<5} {'CV P@1':<14} {'P@5':<6} {'ECE':<6}| fit half P@1  P@5 | check P@1   P@5   MRR   ECE"]
    for arm, t in table.items():
        c, f, k = t["cv"], t["fit_half"], t["check"]
        e = f"{np.mean(c['ece']):.3f}" if c["ece"][0] is not None else "  -  "
        ke = f"{k['ece']:.3f}" if k["ece"] is not None else "  -  "
        out.append(f"{arm:<24} {t['temperature']:<5.2f} {np.mean(c['p@1']):5.2f} ± {np.std(c['p@1']):4.2f}  {np.mean(c['p@5']):5.2f}  {e} | "
                   f"{f['p@1']:5.1f}  {f['p@5']:5.1f}  | {k['p@1']:5.1f}  {k['p@5']:5.1f}  {k['mrr']:.3f}  {ke}")
    return out


def fit_choice(nqa_rows: Path, readers_rows: Path, arm: str = SERVED_ARM, reader: str | None = None,
               passages: str = "pool", ship: Path | None = None, report: Path | None = None,
               weight: int = READERS_WEIGHT, nqa_votes: Path | None = None,
               readers_votes: Path | None = None) -> dict:
    """Measure every arm and, with `ship`, write `arm`'s fit on NarrativeQA's rows and the readers' fit half there
    (the served one: whoqa/ranker/reader_choice.json), with its provenance; `report`: the table as JSON. The votes'
    arms are measured where both votes files are given."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}: use one of {', '.join(ARMS)}")
    if (nqa_votes is None) != (readers_votes is None):
        raise ValueError("give both --nqa-votes and --readers-votes, or neither")
    nqa, readers = load_rows(nqa_rows, nqa_votes), load_rows(readers_rows, readers_votes)
    table = measure(nqa, readers, weight)
    digests = {str(f): file_digest(f) for f in (nqa_rows, readers_rows, nqa_votes, readers_votes) if f is not None}
    if report:
        report.write_text(json.dumps({"arms": table, "rows": digests}, indent=1) + "\n")
    if ship:
        fit_half, _ = halves(readers)
        w = fit_arm(nqa + fit_half * weight, arm) / table[arm]["temperature"]
        names = list(nqa[0]["features"]) + list(CHOICE)
        cv_ = table[arm]["cv"]
        ranker = ChoiceRanker([float(v) for v in w], [names[c] for c in _cols(arm)], len(nqa) + len(fit_half),
                              f"the shared books' NarrativeQA Who questions ({len(nqa)}) and the readers' fit half "
                              f"({len(fit_half)}, of 5 novels)", round(float(np.mean(cv_["ece"])), 3),
                              reader or chooser().name, passages, int(nqa[0].get("also_top", 0)),
                              nqa[0].get("counts_weights"))
        named = {Path(f).name: d for f, d in digests.items()}  # (by name and sha256: where the rows are kept is
        #   the project's business, docs/reproductions.md; the fit names no path of the source tree)
        ship.write_text(json.dumps({**ranker.__dict__, "provenance": {
            "made": datetime.date.today().isoformat(), "arm": arm, "readers_weight": weight,
            "temperature": table[arm]["temperature"],
            "command": f"whoqa fit-choice --nqa {Path(nqa_rows).name} --readers {Path(readers_rows).name} --arm "
                       f"{arm} --readers-weight {weight}" + (f" --nqa-votes {Path(nqa_votes).name} --readers-votes "
                                                           f"{Path(readers_votes).name}" if nqa_votes else "")
                       + f" --ship {ship}",
            "rows": named,
            "book_level_cv": {m: f"{np.mean(cv_[m]):.3f} ± {np.std(cv_[m]):.3f}" for m in ("p@1", "p@5", "mrr", "ece")},
            "check_half": {m: table[arm]["check"][m] for m in ("n", "p@1", "p@5", "mrr", "ece")}}}, indent=1) + "\n")
    return table


__all__ = ["fit_choice", "measure", "lines", "SHIPPED_CHOICE"]
