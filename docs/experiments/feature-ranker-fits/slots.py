"""Issue 51's anonymous-slot memory network, judged by book-level CV on the 41 shared books (ws51), alone and as a
feature of the feature ranker's first stage, over fold seeds 13, 14, 15:

    .venv/bin/python docs/experiments/feature-ranker-fits/slots.py --workspace ws51 --pretrained PRE --out DIR

PRE is a model pretrained on the artificial Who questions of books outside ws51 (`whoqa.memnet.slot_train.pretrain`
on ws-main, every ws51 book excluded: /work/runs/slots/pretrain.py), so no held-out book's artificial questions are in
any model. Per fold seed it writes DIR/slots_cv_seed<S>.json (each question's log-probabilities from the models that
never saw its book: resumable, a seed's file is reused), and DIR/slots.json (the table: each arm's P@1 / P@5 / MRR /
ECE as mean and sd over the seeds, paired differences over books against today's first stage at the first seed).
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from whoqa.core.calibration import ece
from whoqa.core.metrics import paired_book_bootstrap, rank_of_first_correct
from whoqa.core.workspace import Workspace
from whoqa.memnet import slot_train as st
from whoqa.ranker.features import FROM_BOOK, columns
from whoqa.ranker.model import fit, softmax
from whoqa.ranker.train import book_fold_candidates, question_features

OLD = columns(("book_share", "context_mentions", "named"))
ALL = columns(FROM_BOOK)
NET = columns(("network",))
BASE = "today (3 features)"


def judge(rows: list[dict], cols: list[int]) -> list[dict]:
    """Each question ranked by the first stage fit on the other folds' questions."""
    out = []
    for f in sorted({r["fold"] for r in rows}):
        w = fit([r["x"][:, cols] for r in rows if r["fold"] != f], [r["y"] for r in rows if r["fold"] != f])
        for r in (r for r in rows if r["fold"] == f):
            s = r["x"][:, cols] @ w
            order = np.argsort(-s, kind="stable")
            out.append({"question_id": r["question_id"], "book": r["book"], "confidence": float(softmax(s)[order[0]]),
                        "rank": rank_of_first_correct([r["ids"][j] for j in order], r["answers"])})
    return out


def alone(rows: list[dict], cv: dict) -> list[dict]:
    """The network's own ranking (its softmax over the book's characters as the confidence)."""
    out = []
    for r in rows:
        lp = cv[str(r["question_id"])]["logp"]
        ranking = sorted(lp, key=lambda c: -lp[c])
        out.append({"question_id": r["question_id"], "book": r["book"], "confidence": float(np.exp(lp[ranking[0]])),
                    "rank": rank_of_first_correct([int(c) for c in ranking], r["answers"])})
    return out


def scores(judged: list[dict]) -> dict:
    r = [x["rank"] for x in judged]
    return {"p@1": 100 * np.mean([k == 1 for k in r]), "p@5": 100 * np.mean([k is not None and k <= 5 for k in r]),
            "mrr": float(np.mean([1 / k if k else 0.0 for k in r])),
            "ece": ece(np.array([x["confidence"] for x in judged]), np.array([k == 1 for k in r]))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--pretrained", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--seeds", type=int, nargs="*", default=[13, 14, 15])
    ap.add_argument("--epochs", type=int, default=st.SlotTuneConfig.epochs)
    ap.add_argument("--trials", type=int, default=st.SlotTuneConfig.trials)
    a = ap.parse_args()
    ws = Workspace(a.workspace)
    a.out.mkdir(parents=True, exist_ok=True)
    results, n_questions = {}, 0
    zpath = a.out / "slots_zero_shot.json"
    if not zpath.is_file():  # the pretrained network alone, no Who question trained on (the same for every seed)
        st.book_cv(ws, a.pretrained, st.SlotTuneConfig(epochs=0, trials=1), 10, a.seeds[0], out=zpath)
    zero = json.loads(zpath.read_text())["questions"]
    for seed in a.seeds:
        path = a.out / f"slots_cv_seed{seed}.json"
        if not path.is_file():
            st.book_cv(ws, a.pretrained, st.SlotTuneConfig(epochs=a.epochs, trials=a.trials), 10, seed, out=path)
        cv = json.loads(path.read_text())["questions"]
        folds = book_fold_candidates(ws, 10, seed)
        assert all(cv[str(c["question_id"])]["fold"] == c["fold"] for c in folds), "the network's folds differ"
        # the served code path: the network's held-out scores enter as the registry's "network" feature
        rows = question_features(ws, folds, cast=False, network={q: r["logp"] for q, r in cv.items()})
        n_questions = len(rows)
        results[seed] = {BASE: judge(rows, OLD), "+ syntax": judge(rows, ALL),
                         "slots network alone": alone(rows, cv), "slots zero-shot (no Who training)":
                             alone(rows, zero), "3 features + network": judge(rows, OLD + NET),
                         "5 features + network": judge(rows, ALL + NET)}
    table = {}
    for arm in results[a.seeds[0]]:
        per_seed = [scores(results[s][arm]) for s in a.seeds]
        row = {m: {"mean": round(float(np.mean([p[m] for p in per_seed])), 4),
                   "sd": round(float(np.std([p[m] for p in per_seed], ddof=1)), 4) if len(per_seed) > 1 else 0.0}
               for m in ("p@1", "p@5", "mrr", "ece")}
        first, base = results[a.seeds[0]][arm], {x["question_id"]: x for x in results[a.seeds[0]][BASE]}

        def per(x):
            return [100.0 * (x["rank"] == 1), 100.0 * (x["rank"] is not None and x["rank"] <= 5),
                    1 / x["rank"] if x["rank"] else 0.0]
        row["vs_today_seed%d" % a.seeds[0]] = paired_book_bootstrap(
            np.array([per(x) for x in first]), np.array([per(base[x["question_id"]]) for x in first]),
            [x["book"] for x in first], ("p@1", "p@5", "mrr"), 2000, 13)
        row["per_seed"] = per_seed
        table[arm] = row
    (a.out / "slots.json").write_text(json.dumps({"questions": n_questions, "seeds": a.seeds, "arms": table}, indent=1))
    with gzip.open(a.out / "slots_ranks.jsonl.gz", "wt") as f:
        for s in a.seeds:
            for arm, judged in results[s].items():
                f.write(json.dumps({"arm": arm, "seed": s, "ranks": {str(j["question_id"]): [j["book"], j["rank"]]
                                                                     for j in judged}}) + "\n")
    for arm, row in table.items():
        print(f"{arm:38s} P@1 {row['p@1']['mean']:.2f} ± {row['p@1']['sd']:.2f}  P@5 {row['p@5']['mean']:.2f}  "
              f"MRR {row['mrr']['mean']:.3f}  ECE {row['ece']['mean']:.3f}")


if __name__ == "__main__":
    main()
