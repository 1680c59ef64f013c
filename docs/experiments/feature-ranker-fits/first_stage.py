"""Issue 51's ablation without the LLM: the feature ranker's first stage on book-level folds of the 41 shared books,
for each arm (candidates: every character cluster or the cast; features: today's three or with the two syntax
features) and fold seed 13, 14, 15. No LLM is run, so it takes minutes:

    .venv/bin/python docs/experiments/feature-ranker-fits/first_stage.py --workspace ws51

after `whoqa prepare --data ../shared/data --workspace ws51 --no-unlabeled --no-artificial --no-embeddings` and
`whoqa index --workspace ws51`. Writes first_stage.json (the table: mean and sd over fold seeds, ECE, paired
differences over books against today's arm with 95% intervals) and first_stage_ranks.jsonl.gz (per arm, seed and
question: its book and the rank of its first right candidate).
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from whoqa.core.calibration import ece
from whoqa.core.metrics import paired_book_bootstrap
from whoqa.core.workspace import Workspace
from whoqa.evaluation.rerank import book_fold_candidates, question_features
from whoqa.ranker.train import first_stage_folds
from whoqa.ranker.features import FROM_BOOK, columns

OLD = ("book_share", "context_mentions", "named")
SYNTAX = OLD + ("role", "role_with_args")  # the question's role in its context
BOOK_ROLES = OLD + ("book_role", "book_role_with_args")  # the same over every sentence with the question's verb
ARMS = {"today (3 features, every cluster)": (False, OLD), "+ cast": (True, OLD), "+ syntax": (False, SYNTAX),
        "+ cast + syntax": (True, SYNTAX), "+ book roles": (False, BOOK_ROLES), "+ cast + book roles": (True, BOOK_ROLES),
        "+ cast + syntax + book roles": (True, FROM_BOOK)}
BASE = "today (3 features, every cluster)"


def judge(rows: list[dict], columns: list[int]) -> list[dict]:
    """Each question ranked by the first stage fit on the other folds' questions."""
    return first_stage_folds(rows, columns)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--seeds", type=int, nargs="*", default=[13, 14, 15])
    ap.add_argument("--name", default="first_stage", help="the output files' stem")
    a = ap.parse_args()
    ws = Workspace(a.workspace)
    rows = {cast: question_features(ws, book_fold_candidates(ws, 10, a.seeds[0]), cast) for cast in (False, True)}
    results, ranks = {}, []
    for seed in a.seeds:
        fold_of = {c["question_id"]: c["fold"] for c in book_fold_candidates(ws, 10, seed)}
        for arm, (cast, feats) in ARMS.items():
            seeded = [{**r, "fold": fold_of[r["question_id"]]} for r in rows[cast]]
            judged = judge(seeded, columns(feats))
            results[(arm, seed)] = judged
            ranks.append({"arm": arm, "seed": seed, "ranks": {str(j["question_id"]): [j["book"], j["rank"]]
                                                               for j in judged}})
    table = {}
    for arm in ARMS:
        per_seed = []
        for seed in a.seeds:
            j = results[(arm, seed)]
            r = [x["rank"] for x in j]
            per_seed.append({"p@1": 100 * np.mean([k == 1 for k in r]), "p@5": 100 * np.mean([k is not None and k <= 5
                                                                                              for k in r]),
                             "mrr": float(np.mean([1 / k if k else 0.0 for k in r])),
                             "ece": ece(np.array([x["confidence"] for x in j]), np.array([k == 1 for k in r]))})
        row = {m: {"mean": round(float(np.mean([s[m] for s in per_seed])), 4),
                   "sd": round(float(np.std([s[m] for s in per_seed], ddof=1)), 4) if len(per_seed) > 1 else 0.0}
               for m in ("p@1", "p@5", "mrr", "ece")}
        a13, b13 = results[(arm, a.seeds[0])], results[(BASE, a.seeds[0])]
        base = {x["question_id"]: x for x in b13}

        def per(x):
            return [100.0 * (x["rank"] == 1), 100.0 * (x["rank"] is not None and x["rank"] <= 5),
                    1 / x["rank"] if x["rank"] else 0.0]
        row["vs_today_seed%d" % a.seeds[0]] = paired_book_bootstrap(
            np.array([per(x) for x in a13]), np.array([per(base[x["question_id"]]) for x in a13]),
            [x["book"] for x in a13], ("p@1", "p@5", "mrr"), 2000, 13)
        row["per_seed"] = per_seed
        table[arm] = row
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{a.name}.json").write_text(json.dumps({"questions": len(rows[False]), "seeds": a.seeds,
                                                        "arms": table}, indent=1))
    with gzip.open(a.out / f"{a.name}_ranks.jsonl.gz", "wt") as f:
        for r in ranks:
            f.write(json.dumps(r) + "\n")
    for arm, row in table.items():
        print(f"{arm:38s} P@1 {row['p@1']['mean']:.2f} ± {row['p@1']['sd']:.2f}  P@5 {row['p@5']['mean']:.2f}  "
              f"MRR {row['mrr']['mean']:.3f}  ECE {row['ece']['mean']:.3f}")


if __name__ == "__main__":
    main()
