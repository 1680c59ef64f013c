"""Issue 51: the shot policies of the served Who prompt, paired per fold seed over books, from
cast_roles_llm_ranks.jsonl.gz (cast_roles_llm.py's arms: 3 shots drawn per question, 3 fixed shots per book, no shots):

    .venv/bin/python docs/experiments/feature-ranker-fits/shots_paired.py

Prints each arm's P@1 / P@5 / MRR over fold seeds 13-15 and its paired difference against the per-question arm (95%
interval from resampling books); writes shots_paired.json."""
import gzip
import json
from pathlib import Path

import numpy as np

from whoqa.core.metrics import paired_book_bootstrap

HERE = Path(__file__).parent
BASE = "cast + book roles + 0.5B Q4_0"
rows = [json.loads(line) for line in gzip.open(HERE / "cast_roles_llm_ranks.jsonl.gz", "rt")]
ranks = {(r["arm"], r["seed"]): r["ranks"] for r in rows}


def scores(rk: dict, ids: list[str]) -> np.ndarray:
    """(n, 3): P@1, P@5 and reciprocal rank of each question's final ranking."""
    return np.array([[100.0 * (rk[q]["final"] == 1), 100.0 * (rk[q]["final"] is not None and rk[q]["final"] <= 5),
                      1 / rk[q]["final"] if rk[q]["final"] else 0.0] for q in ids])


out = {}
for arm in sorted({a for a, _ in ranks}):
    seeds = sorted(s for a, s in ranks if a == arm)
    per = {}
    for s in seeds:
        ids = sorted(ranks[(arm, s)])
        m = scores(ranks[(arm, s)], ids)
        d = paired_book_bootstrap(m, scores(ranks[(BASE, s)], ids), [ranks[(arm, s)][q]["book"] for q in ids],
                                  ("p@1", "p@5", "mrr"))["difference"] if arm != BASE else None
        per[s] = {"p@1": round(m[:, 0].mean(), 2), "p@5": round(m[:, 1].mean(), 2), "mrr": round(m[:, 2].mean(), 3),
                  "vs_per_question_p@1": d and d["p@1"]}
    p1 = [v["p@1"] for v in per.values()]
    out[arm] = {"p@1": f"{np.mean(p1):.2f} ± {np.std(p1):.2f}",
                "mrr": round(float(np.mean([v["mrr"] for v in per.values()])), 3), "seeds": per}
    print(arm, json.dumps(out[arm]))
(HERE / "shots_paired.json").write_text(json.dumps(out, indent=1) + "\n")
