"""Issue 51: the cast with the question's whole-book roles as the first stage (the best first stage measured:
first_stage+book_roles.json), the 0.5B's Q4_0 name scores over its top 5 (the served prompt, names read together),
one fold seed per run:

    .venv/bin/python docs/experiments/feature-ranker-fits/cast_roles_llm.py --workspace ws51 --gguf Q40.gguf --seed 13 \
        [--shot-policy fixed] [--shots 0]

(--shot-policy fixed: the same shots for every question of a book, whoqa.llm.prompt; --shots 0: none, what a
workspace without questions of its own served before the fit recorded its examples.) Prints the row and appends it to cast_roles_llm.jsonl; the per-question ranks go to cast_roles_llm_ranks.jsonl.gz."""
import argparse
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from whoqa.evaluation.rerank import rerank
from whoqa.ranker.config import RerankConfig

ap = argparse.ArgumentParser()
ap.add_argument("--workspace", type=Path, required=True)
ap.add_argument("--gguf", type=Path, required=True, help="the 0.5B requantised to Q4_0 (requant.py makes it)")
ap.add_argument("--seed", type=int, default=13)
ap.add_argument("--shot-policy", default="question")
ap.add_argument("--shots", type=int, default=RerankConfig.shots)
ap.add_argument("--out", type=Path, default=Path(__file__).parent)
a = ap.parse_args()
t = time.perf_counter()
cfg = replace(RerankConfig(), base=str(a.gguf.resolve()), candidates="features", fold_seed=a.seed,
              runtime="llama-cpp-python", cast=True,
              stage1="book_share,context_mentions,named,book_role,book_role_with_args", shot_policy=a.shot_policy,
              shots=a.shots)
s = rerank(a.workspace, None, cfg, progress=True).record
row = {"arm": "cast + book roles + 0.5B Q4_0" + ("" if a.shot_policy == "question" else f", {a.shot_policy} shots")
       + ("" if a.shots == RerankConfig.shots else f", {a.shots} shots"),
       "seed": a.seed,
       "first_stage": {k: s["candidates"][k] for k in ("p@1", "p@5", "mrr")},
       "with_llm": {k: s["combined"][k] for k in ("p@1", "p@5", "mrr")}, "ece": s["ece"],
       "seconds": round(time.perf_counter() - t, 1)}
with (a.out / "cast_roles_llm.jsonl").open("a") as f:
    f.write(json.dumps(row) + "\n")
with gzip.open(a.out / "cast_roles_llm_ranks.jsonl.gz", "at") as f:
    f.write(json.dumps({"arm": row["arm"], "seed": a.seed, "ranks": s["ranks"]}) + "\n")
print(json.dumps(row))
