"""Issue 51's ablation: the feature ranker on book-level folds of the 41 shared books, arm by arm, over 3 fold seeds.

Each arm is one `whoqa rerank --candidates features` configuration (the same command on the CLI); this script runs
them in one process (spaCy and the LLM load once) and writes one line per (arm, seed) to ablation.jsonl, then
each question's book and rank of its first right candidate to ablation_ranks.jsonl.gz (the file a reproduction reads, with its sha256 in README.md):

    .venv/bin/python docs/experiments/feature-ranker-fits/ablation.py --workspace ws51

after `whoqa prepare --data ../shared/data --workspace ws51 --no-unlabeled --no-artificial --no-embeddings` and
`whoqa index --workspace ws51`. The LLM's name scores are shared by every arm (WS/runs/features+by-book/...).
Resumable: an (arm, seed) already in ablation.jsonl is skipped.
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from whoqa.evaluation.rerank import rerank
from whoqa.ranker.config import RerankConfig

OLD = "book_share,context_mentions,named"
ARMS = {  # name -> (cast, stage-1 features): each arm's "candidates" row is its first stage, "combined" + the LLM
    "+ cast + syntax": (True, "all"),
    "first stage (today's features) + 0.5B": (False, OLD),
    "+ cast": (True, OLD),
    "+ syntax": (False, "all"),
}
SEEDS = (13, 14, 15)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS))
    a = ap.parse_args()
    out = a.out / "ablation.jsonl"
    done = {(r["arm"].replace(" (default)", ""), r["seed"]) for r in map(json.loads, out.read_text().splitlines())} if out.is_file() else set()
    for seed in a.seeds:
        for arm, (cast, stage1) in ARMS.items():
            if (arm, seed) in done:
                continue
            t = time.perf_counter()
            cfg = replace(RerankConfig(), candidates="features", fold_seed=seed, cast=cast, stage1=stage1)
            s = rerank(a.workspace, None, cfg, progress=True).record
            row = {"arm": arm, "seed": seed, "cast": cast, "stage1": stage1,
                   "first_stage": {k: s["candidates"][k] for k in ("p@1", "p@5", "mrr")},
                   "with_llm": {k: s["combined"][k] for k in ("p@1", "p@5", "mrr")}, "ece": s["ece"],
                   "questions": s["questions"], "seconds": round(time.perf_counter() - t, 1),
                   "ranks": s["ranks"]}
            with out.open("a") as f:
                f.write(json.dumps({k: v for k, v in row.items() if k != "ranks"}) + "\n")
            with gzip.open(a.out / "ablation_ranks.jsonl.gz", "at") as f:
                f.write(json.dumps({"arm": arm, "seed": seed, "ranks": row["ranks"]}) + "\n")
            print(json.dumps({k: v for k, v in row.items() if k != "ranks"}), flush=True)


if __name__ == "__main__":
    main()
