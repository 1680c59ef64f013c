"""Issue 63: reading and counting in one first stage, judged by book-level CV (10 book folds, fold seeds 13/14/15) on
a workspace's Who set, without the LLM's name scores (minutes):

    .venv/bin/python docs/experiments/reading-and-counting/combine.py --workspace ws51 \
        --written docs/experiments/reading-and-counting/written_1.5b.jsonl.gz

Arms: the served fit's first-stage features over the cast (SERVED), the same with the written answer's two features
(`written`: the reader named it first; `written_any`: named it at all), and the written answer as a route of its
own (its first linked character, else the served first stage's ranking). Writes combine.json (mean and sd over fold
seeds of P@1, P@5, MRR, ECE; paired differences over books against SERVED at seed 13 with 95% intervals) and
combine_ranks.jsonl.gz (per arm, seed and question: its book and the rank of its first right candidate).
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
from whoqa.ranker.features import SERVED, STAGE1, WRITTEN, columns
from whoqa.ranker.train import book_fold_candidates, first_stage_folds, question_features

ARMS = {"served first stage": SERVED, "+ written": SERVED + WRITTEN, "written alone, else served": SERVED}


def scores(rank: int | None) -> list[float]:
    return [100.0 * (rank == 1), 100.0 * (rank is not None and rank <= 5), 1 / rank if rank else 0.0]


def written_first(row: dict) -> int | None:
    """The written answer as a route: its first linked character first (the served first stage's order after)."""
    return row["ids"].index(row["written"][0]) if row["written"] and row["written"][0] in row["ids"] else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--written", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--seeds", type=int, nargs="*", default=[13, 14, 15])
    ap.add_argument("--only-written", action="store_true", help="judge only the questions the written file holds")
    ap.add_argument("--name", default="combine", help="the output files' stem")
    a = ap.parse_args()
    ws = Workspace(a.workspace)
    with gzip.open(a.written, "rt", encoding="utf-8") as f:
        written = {r["key"]: r.get("linked") or [] for r in map(json.loads, f)}
    cands = book_fold_candidates(ws, 10, a.seeds[0])
    if a.only_written:  # (a partial file: the questions it reaches, each still judged by a fit on other books)
        cands = [c for c in cands if str(c["question_id"]) in written]
    rows = question_features(ws, cands, True, STAGE1, written=written)
    for r in rows:
        r["written"] = written.get(str(r["question_id"]), [])
    missing = sum(str(r["question_id"]) not in written for r in rows)
    results, ranks = {}, []
    for seed in a.seeds:
        fold_of = {c["question_id"]: c["fold"] for c in book_fold_candidates(ws, 10, seed)}  # (folds of all books)
        for arm, feats in ARMS.items():
            seeded = [{**r, "fold": fold_of[r["question_id"]]} for r in rows]
            judged = first_stage_folds(seeded, columns(feats), written_first if arm.startswith("written alone") else None)
            results[(arm, seed)] = judged
            ranks.append({"arm": arm, "seed": seed, "ranks": {str(j["question_id"]): [j["book"], j["rank"]]
                                                               for j in judged}})
    table = {"questions": len(rows), "without_written_answer": missing, "seeds": a.seeds, "arms": {}}
    base = {j["question_id"]: j for j in results[("served first stage", a.seeds[0])]}
    for arm in ARMS:
        per = []
        for seed in a.seeds:
            r = [x["rank"] for x in results[(arm, seed)]]
            per.append({"p@1": 100 * np.mean([k == 1 for k in r]),
                        "p@5": 100 * np.mean([k is not None and k <= 5 for k in r]),
                        "mrr": float(np.mean([1 / k if k else 0.0 for k in r])),
                        "ece": ece(np.array([x["confidence"] for x in results[(arm, seed)]]),
                                   np.array([k == 1 for k in r]))})
        row = {m: {"mean": round(float(np.mean([p[m] for p in per])), 4), "sd": round(float(np.std([p[m] for p in per])), 4)}
               for m in ("p@1", "p@5", "mrr", "ece")}
        this = results[(arm, a.seeds[0])]
        row["vs_served_seed13"] = paired_book_bootstrap(
            [scores(j["rank"]) for j in this], [scores(base[j["question_id"]]["rank"]) for j in this],
            [j["book"] for j in this], ("p@1", "p@5", "mrr")) if arm != "served first stage" else None
        table["arms"][arm] = row
    (a.out / f"{a.name}.json").write_text(json.dumps(table, indent=1))
    with gzip.open(a.out / f"{a.name}_ranks.jsonl.gz", "wt", encoding="utf-8") as f:
        for r in ranks:
            f.write(json.dumps(r) + "\n")
    for arm, row in table["arms"].items():
        print(f"{arm:<30} P@1 {row['p@1']['mean']:.2f} ± {row['p@1']['sd']:.2f}  P@5 {row['p@5']['mean']:.2f}  "
              f"MRR {row['mrr']['mean']:.3f}  ECE {row['ece']['mean']:.3f}")


if __name__ == "__main__":
    main()
