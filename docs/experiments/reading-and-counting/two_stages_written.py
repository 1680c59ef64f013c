"""Issue 63: one ranking from reading and counting, both stages as served (the cast with whole-book roles, the
0.5B's Q4_0 name scores over the top 5, no shots: the shipped fit's recipe, docs/experiments/feature-ranker-fits/cast_roles_llm.py)
by book-level CV, one fold seed per run, with the reader's written answers linked (written.py's file):

    .venv/bin/python docs/experiments/reading-and-counting/two_stages_written.py --workspace ws51 --gguf Q40.gguf --seed 13 \
        --written docs/experiments/reading-and-counting/written_fusion_1.5b.jsonl.gz --arm written-first

Arms: `served` (no written answer), `written-first` (the written answer, where it links to a candidate, first with
the share it was right in the fit's questions; the two stages order the rest), `written-only` (as written-first, but
where the written answer links the 0.5B scores no names: the first stage orders the rest), `written-mix` (as
written-only, but the written candidate takes its place by the share it was right among the counted probabilities), `written-features` (its two features
in both stages), `both`. Appends the row to two_stages_written.jsonl and the per-question ranks to
two_stages_written_ranks.jsonl.gz."""
import argparse
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from whoqa.evaluation.rerank import rerank
from whoqa.ranker.config import RerankConfig

SERVED = "book_share,context_mentions,named,book_role,book_role_with_args"
ARMS = {"served": (SERVED, False), "written-first": (SERVED, True), "written-only": (SERVED, True),
        "written-mix": (SERVED, True),
        "written-features": (SERVED + ",written,written_any", False), "both": (SERVED + ",written,written_any", True)}

ap = argparse.ArgumentParser()
ap.add_argument("--workspace", type=Path, required=True)
ap.add_argument("--gguf", type=Path, required=True, help="the 0.5B requantised to Q4_0 (whoqa.llm.models.requantised)")
ap.add_argument("--seed", type=int, default=13)
ap.add_argument("--written", type=Path, required=True)
ap.add_argument("--arm", choices=ARMS, default="written-first")
ap.add_argument("--out", type=Path, default=Path(__file__).parent)
a = ap.parse_args()
t = time.perf_counter()
stage1, first = ARMS[a.arm]
cfg = replace(RerankConfig(), base=str(a.gguf.resolve()), candidates="features", fold_seed=a.seed,
              runtime="llama-cpp-python", cast=True, stage1=stage1, shots=0,
              written=str(a.written) if a.arm != "served" else None, written_first=first,
              written_only=a.arm in ("written-only", "written-mix"), written_mix=a.arm == "written-mix")
s = rerank(a.workspace, None, cfg, progress=True).record
row = {"arm": a.arm, "seed": a.seed, "written": a.written.name if a.arm != "served" else None,
       "first_stage": {k: s["candidates"][k] for k in ("p@1", "p@5", "mrr")},
       "with_llm": {k: s["combined"][k] for k in ("p@1", "p@5", "mrr")}, "ece": s["ece"],
       "written_first_share": s["ranker"].get("written_first"), "seconds": round(time.perf_counter() - t, 1)}
with (a.out / "two_stages_written.jsonl").open("a") as f:
    f.write(json.dumps(row) + "\n")
with gzip.open(a.out / "two_stages_written_ranks.jsonl.gz", "at") as f:
    f.write(json.dumps({"arm": a.arm, "seed": a.seed, "written": row["written"], "ranks": s["ranks"]}) + "\n")
print(json.dumps(row))
