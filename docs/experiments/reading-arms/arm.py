"""One loop for every reading arm: each of the target's first N other questions per book answered by the arm,
one JSON line each to --out (resumable: questions already there are skipped)."""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path
from typing import Callable

from whoqa.evaluation.unseen import other_questions, served_service


def run(make: Callable, show: Callable[[dict], str], doc: str | None = None) -> None:
    """make(svc) -> answer(q) -> row; show(row): the progress line's end."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--workspace", type=Path, required=True, help="the training workspace whose fits serve")
    ap.add_argument("--target", type=Path, required=True, help="the prepared books asked (eval --data's)")
    ap.add_argument("--per-book", type=int, default=10)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    done = {json.loads(line)["question_id"] for line in gzip.open(a.out, "rt")} if a.out.is_file() else set()
    svc = served_service(a.workspace, a.target)
    answer = make(svc)
    qs = [q for q in other_questions(a.target, a.per_book) if q["question_id"] not in done]
    t0 = time.perf_counter()
    for i, q in enumerate(qs, 1):
        row = answer(q)
        with gzip.open(a.out, "at") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{i}/{len(qs)} {time.perf_counter() - t0:.0f}s {show(row)}", flush=True)
