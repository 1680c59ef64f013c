"""Issue 63, item 2: the written name's likelihood under the reader as a gate between reading and counting, by
book-level CV. Per question, the served fit ranks the written answer first where it links (`written-only` with the
second write: two_stages_written_ranks.jsonl.gz), counting (the first stage + the 0.5B's name scores: the `served`
arm) ranks otherwise. The gate keeps the written answer first only where its likelihood (written_likelihood.py's
file: the linked name's or the written text's log-likelihood per token, or summed) reaches a threshold chosen on the
other folds' questions (best P@1 there, then MRR), else takes counting's ranking. Same book folds and seeds as the
arms' (13/14/15).

    .venv/bin/python docs/experiments/reading-and-counting/written_gate.py --workspace ws51

Writes written_gate.json: P@1 / P@5 / MRR per feature (mean ± sd over seeds), the share kept, the paired difference
against the served arm over books (95%). Ranks only: the gate's probabilities are not calibrated here (ECE needs a
fit).
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from whoqa.core.metrics import paired_book_bootstrap
from whoqa.ranker.train import book_fold_candidates

HERE = Path(__file__).parent
FEATURES = ("ll_name_per_token", "ll_name", "ll_text_per_token", "ll_text")
SEEDS = (13, 14, 15)


def ranks(path: Path, arm: str, written: str | None) -> dict[int, dict[str, dict]]:
    """seed -> question id -> {book, final} for one arm's rows of the ranks file."""
    out = {}
    with gzip.open(path, "rt") as f:
        for r in map(json.loads, f):
            if r.get("arm") == arm and r.get("written") == written:
                out[r["seed"]] = r["ranks"]
    return out


def scores(rs: list[int | None]) -> dict[str, float]:
    def p(k):
        return 100.0 * float(np.mean([r is not None and r <= k for r in rs]))
    return {"p@1": p(1), "p@5": p(5), "mrr": float(np.mean([1.0 / r if r else 0.0 for r in rs]))}


def gated(q: str, tau: float | None, x: dict, written: dict, counting: dict):
    """The question's rank under the gate: the written arm's where its likelihood reaches tau (or nothing is
    measured: no link), else counting's."""
    if q not in x or tau is None or x[q] >= tau:
        return written[q]["final"]
    return counting[q]["final"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--likelihood", type=Path, default=HERE / "written_likelihood_1.5b.jsonl.gz")
    ap.add_argument("--ranks", type=Path, default=HERE / "two_stages_written_ranks.jsonl.gz")
    ap.add_argument("--written", type=Path, default=HERE / "written_pool_again_1.5b.jsonl.gz")
    a = ap.parse_args()
    with gzip.open(a.likelihood, "rt") as f:
        ll = {r["key"]: r for r in map(json.loads, f)}
    written_arm = ranks(a.ranks, "written-only", "written_pool_again_1.5b.jsonl.gz")
    counting_arm = ranks(a.ranks, "served", None)
    with gzip.open(a.written, "rt") as f:
        linked = {r["key"] for r in map(json.loads, f) if r.get("linked")}
    out = {"questions with a likelihood": len(ll), "arms": {}}
    # the 0.5B gone: the written answer first where it links, else the first stage's ranking alone
    per_seed = [scores([written_arm[s][q]["final"] if q in linked else counting_arm[s][q]["first"]
                        for q in written_arm[s]]) for s in SEEDS]
    out["arms"]["written first where it links, else the first stage alone (no 0.5B)"] = {
        k: f"{np.mean([x[k] for x in per_seed]):.{d}f} ± {np.std([x[k] for x in per_seed]):.{d}f}"
        for k, d in (("p@1", 2), ("p@5", 2), ("mrr", 3))}
    for feature in ("served (written first where it links)",) + FEATURES:
        per_seed, kept, diffs = [], [], []
        for seed in SEEDS:
            written, counting = written_arm[seed], counting_arm[seed]
            fold = {str(c["question_id"]): c["fold"] for c in book_fold_candidates(a.workspace, 10, seed)}
            qs = [q for q in written if q in fold]
            x = {q: ll[q][feature] for q in qs if q in ll} if feature in FEATURES else {}
            got = {}
            for f in sorted(set(fold[q] for q in qs)):
                train = [q for q in qs if fold[q] != f]
                best, tau = None, None
                for t in [None] + sorted({x[q] for q in train if q in x}):
                    s = scores([gated(q, t, x, written, counting) for q in train])
                    key = (s["p@1"], s["mrr"])
                    if best is None or key > best:
                        best, tau = key, t
                for q in qs:
                    if fold[q] == f:
                        got[q] = gated(q, tau, x, written, counting)
                kept.append(sum(1 for q in qs if fold[q] == f and q in x and (tau is None or x[q] >= tau)))
            per_seed.append(scores([got[q] for q in qs]))
            hits = lambda rank: [[100.0 * (rank[q] is not None and rank[q] <= 1)] for q in qs]  # noqa: E731
            diffs.append(paired_book_bootstrap(hits(got), hits({q: written[q]["final"] for q in qs}),
                                               [written[q]["book"] for q in qs], ("p@1",))["difference"]["p@1"])
        out["arms"][feature] = {
            **{k: f"{np.mean([s[k] for s in per_seed]):.{d}f} ± {np.std([s[k] for s in per_seed]):.{d}f}"
               for k, d in (("p@1", 2), ("p@5", 2), ("mrr", 3))},
            "written kept first (of those with a link), mean over seeds": round(sum(kept) / len(SEEDS), 1),
            "p@1 minus served, paired over books (seed 13)": diffs[0]}
    (HERE / "written_gate.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
