"""Issue 51: the served Who fit (every cluster, three features, the 0.5B over the first stage's top 5) with shorter
prompts, for a warm answer within 1.5 s on 2 cores. The 0.5B reads about 200 prompt tokens a second here and the
prompt is all but a few hundredths of a second of a warm Who answer, so its length is the answer's time.

    .venv/bin/python docs/experiments/feature-ranker-fits/prompt_size.py --workspace ws51

One `whoqa rerank --candidates features --runtime llama-cpp-python [--prompt-tokens N --shots S]` per (arm, fold
seed), in one process; rows to prompt_size.jsonl (with seconds per question scored), each question's rank of its
first right candidate to prompt_size_ranks.jsonl.gz. Resumable: an (arm, seed) already written is skipped."""
from __future__ import annotations

import argparse
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from whoqa.evaluation.rerank import rerank
from whoqa.ranker.config import RerankConfig

ARMS = {"512 tokens, 3 shots (served)": (512, 3), "320 tokens, 3 shots": (320, 3), "256 tokens, no shots": (256, 0)}
SEEDS = (13, 14, 15)


def summary(out: Path) -> dict:
    """Each arm's P@1 / P@5 / MRR / ECE as mean ± sd over the fold seeds, and its paired P@1 / MRR difference from
    the served prompt on fold seed 13 (95% intervals from resampling books)."""
    import numpy as np
    from whoqa.core.metrics import paired_book_bootstrap
    rows = [json.loads(line) for line in (out / "prompt_size.jsonl").read_text().splitlines()]
    ranks = {(r["arm"], r["seed"]): r["ranks"] for r in map(json.loads, gzip.open(out / "prompt_size_ranks.jsonl.gz", "rt"))}
    served = next(iter(ARMS))
    table = {}
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        if not mine:
            continue
        stat = {k: [r["with_llm"][k] for r in mine] for k in ("p@1", "p@5", "mrr")} | {"ece": [r["ece"] for r in mine]}
        table[arm] = {k: f"{np.mean(v):.2f} ± {np.std(v):.2f}" if k in ("p@1", "p@5") else
                      f"{np.mean(v):.3f} ± {np.std(v):.3f}" for k, v in stat.items()}
        table[arm]["seeds"] = sorted(r["seed"] for r in mine)
        table[arm]["seconds per question (seed 13, one process beside others)"] = round(
            next(r["seconds"] for r in mine if r["seed"] == 13) / mine[0]["questions"], 2)
        if arm != served and (arm, 13) in ranks and (served, 13) in ranks:
            a, b = ranks[(arm, 13)], ranks[(served, 13)]
            keys = sorted(a)
            score = lambda rk: [[100.0 * (rk[q]["final"] == 1), 1.0 / rk[q]["final"] if rk[q]["final"] else 0.0]
                                for q in keys]
            diff = paired_book_bootstrap(score(a), score(b), [a[q]["book"] for q in keys], ["p@1", "mrr"])
            table[arm]["minus served, fold seed 13"] = diff["difference"]
    return table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS))
    ap.add_argument("--arms", nargs="*", default=list(ARMS))
    ap.add_argument("--summary", action="store_true", help="only summarise what is there, to prompt_size.json")
    a = ap.parse_args()
    if a.summary:
        table = summary(a.out)
        (a.out / "prompt_size.json").write_text(json.dumps(table, indent=1) + "\n")
        print(json.dumps(table, indent=1))
        return
    out = a.out / "prompt_size.jsonl"
    done = {(r["arm"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())} if out.is_file() else set()
    for seed in a.seeds:
        for arm in a.arms:
            if (arm, seed) in done:
                continue
            tokens, shots = ARMS[arm]
            t = time.perf_counter()
            cfg = replace(RerankConfig(), candidates="features", fold_seed=seed, runtime="llama-cpp-python",
                          prompt_tokens=tokens, shots=shots)
            s = rerank(a.workspace, None, cfg, progress=True).record
            row = {"arm": arm, "seed": seed, "prompt_tokens": tokens, "shots": shots,
                   "first_stage": {k: s["candidates"][k] for k in ("p@1", "p@5", "mrr")},
                   "with_llm": {k: s["combined"][k] for k in ("p@1", "p@5", "mrr")}, "ece": s["ece"],
                   "questions": s["questions"], "seconds": round(time.perf_counter() - t, 1)}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            with gzip.open(a.out / "prompt_size_ranks.jsonl.gz", "at") as f:
                f.write(json.dumps({"arm": arm, "seed": seed, "ranks": s["ranks"]}) + "\n")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
