"""Issue 63: the table of two_stages_written.py's runs (the last row per arm and fold seed): P@1 / P@5 / MRR / ECE as
mean ± sd over fold seeds, and each arm minus `served` paired over books (95% intervals, resampling whole books) per
seed; an arm is named with the written answers it read where they are not the fusion passages' (`(pool)`). Writes
two_stages_written.json.

    .venv/bin/python docs/experiments/reading-and-counting/two_stages_table.py
"""
import gzip
import json
from pathlib import Path

import numpy as np

from whoqa.core.metrics import paired_book_bootstrap

HERE = Path(__file__).parent


def label(r: dict) -> str:
    """An arm with the written answers it read: `written-first` from the fusion passages (the first file made), else
    `written-first (pool)`, `written-only (pool again)`."""
    w = r.get("written")
    return r["arm"] if w in (None, "written_fusion_1.5b.jsonl.gz") else \
        f"{r['arm']} ({w.removeprefix('written_').split('_1.5b')[0].replace('_', ' ')})"


lines = [json.loads(line) for line in (HERE / "two_stages_written.jsonl").open()]
with gzip.open(HERE / "two_stages_written_ranks.jsonl.gz", "rt") as f:
    rank_lines = [json.loads(line) for line in f]  # (appended with the rows, in their order)
rows = {(label(r), r["seed"]): r for r in lines}
ranks = {(label(r), r["seed"]): k["ranks"] for r, k in zip(lines, rank_lines)}
seeds = sorted({s for _, s in rows})
table = {}
for arm in dict.fromkeys(a for a, _ in rows):
    per = [rows[(arm, s)] for s in seeds if (arm, s) in rows]
    out = {m: {"mean": round(float(np.mean([r["with_llm"][m] for r in per])), 3),
               "sd": round(float(np.std([r["with_llm"][m] for r in per])), 3)} for m in ("p@1", "p@5", "mrr")}
    out["ece"] = {"mean": round(float(np.mean([r["ece"] for r in per])), 3),
                  "sd": round(float(np.std([r["ece"] for r in per])), 3)}
    out["seeds"] = [r["seed"] for r in per]
    if arm != "served":
        out["minus_served"] = {}
        for s in out["seeds"]:
            a, b = ranks[(arm, s)], ranks[("served", s)]
            keys = sorted(a)

            def score(rank):
                return [100.0 * (rank == 1), 100.0 * (rank is not None and rank <= 5), 1 / rank if rank else 0.0]
            d = paired_book_bootstrap([score(a[k]["final"]) for k in keys], [score(b[k]["final"]) for k in keys],
                                      [a[k]["book"] for k in keys], ("p@1", "p@5", "mrr"))["difference"]
            out["minus_served"][str(s)] = d
    table[arm] = out
(HERE / "two_stages_written.json").write_text(json.dumps(table, indent=1) + "\n")
for arm, t in table.items():
    print(arm, {m: f"{t[m]['mean']:.2f} ± {t[m]['sd']:.2f}" for m in ("p@1", "p@5", "mrr", "ece")},
          {s: {m: [round(v, 2) for v in (d[m]["mean"], *d[m]["ci95"])] for m in ("p@1",)}
           for s, d in t.get("minus_served", {}).items()})
