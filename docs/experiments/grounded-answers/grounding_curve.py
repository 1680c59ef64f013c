"""Issue 52, item 3: the coverage/accuracy curve of grounded answers, to choose GroundingConfig.threshold.

Each non-Who question of a prepared workspace's books (the first --per-book of each) is answered by the service's LLM
route (the installed local LLM reading ServiceConfig.passages' windows) with nothing withheld; its support (the best
ROUGE-L of the answer against a span of a passage sentence it read, whoqa.llm.grounding) and its ROUGE-L against
the two gold answers are kept. For each threshold: the share of questions answered (support >= threshold), the mean
ROUGE-L of those, of the withheld ones, and over all questions with a withheld answer scoring 0. The threshold
served is the one that best separates the two (the largest gap between answered and withheld ROUGE-L; of equal
ones, the highest).

    python docs/experiments/grounded-answers/grounding_curve.py --workspace WS [--per-book 5] [--out DIR] [--max-seconds S]

Writes DIR/grounding.jsonl.gz (per question: answer, support, ROUGE-L; appended as it goes, so a run stopped or out
of --max-seconds resumes where it was) and DIR/grounding.json (the table over the questions answered so far).
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from whoqa.core.lexicon import is_who_question
from whoqa.core.store import load_questions
from whoqa.core.metrics import normalize_text, rouge_l
from whoqa.core.workspace import Workspace
from whoqa.llm.grounding import GroundingConfig
from whoqa.service import Service, ServiceConfig, installed_llm

THRESHOLDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def curve(rows: list[dict]) -> list[dict]:
    out = []
    for t in THRESHOLDS:
        kept = [r["rouge_l"] for r in rows if r["support"] >= t and r["answer"]]
        dropped = [r["rouge_l"] for r in rows if not (r["support"] >= t and r["answer"])]
        out.append({"threshold": t, "answered": round(100 * len(kept) / max(1, len(rows)), 1),
                    "rouge_l_answered": round(sum(kept) / len(kept), 2) if kept else None,
                    "rouge_l_withheld": round(sum(dropped) / len(dropped), 2) if dropped else None,
                    "rouge_l_all_withheld_0": round(sum(kept) / max(1, len(rows)), 2)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--per-book", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent))
    ap.add_argument("--max-seconds", type=float, default=None)
    args = ap.parse_args()
    ws = Workspace(args.workspace)
    svc = Service(ws, ServiceConfig(grounding=GroundingConfig(threshold=0.0)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "grounding.jsonl.gz"
    rows, t0 = [], time.perf_counter()
    if path.is_file():
        with gzip.open(path, "rt") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    done = {r["question_id"] for r in rows}
    asked = {b: [q for q in qs if not is_who_question(q["question"])][:args.per_book]
             for b, qs in sorted(load_questions(ws).items()) if (ws.books / b).is_dir()}
    todo = [(b, qs[i]) for i in range(args.per_book) for b, qs in asked.items() if i < len(qs)]  # books in turn
    for b, q in todo:
        if q["question_id"] in done:
            continue
        if args.max_seconds is not None and time.perf_counter() - t0 > args.max_seconds:
            break
        ans = svc.answer(b, q["question"], "llm")
        text = ans.answer or ans.withheld or ""
        score = 100 * rouge_l(normalize_text(text) or "-", [normalize_text(q["answer1"]),
                                                            normalize_text(q["answer2"])])
        rows.append({"book": b, "question_id": q["question_id"], "question": q["question"], "answer": text,
                     "gold": [q["answer1"], q["answer2"]], "support": ans.support, "rouge_l": round(score, 2),
                     "grounds": [g.text for g in ans.grounds[:1]]})
        with gzip.open(path, "at") as f:  # one gzip member per row: readable as one file, resumable
            f.write(json.dumps(rows[-1]) + "\n")
        print(f"{len(rows)} {time.perf_counter() - t0:.0f}s support {ans.support:.2f} rouge {score:5.1f} "
              f"{q['question']!r} -> {text!r}", flush=True)
    summary = {"model": installed_llm(None),
               "questions": len(rows), "of": len(todo), "books": len({r["book"] for r in rows}),
               "seconds_this_run": round(time.perf_counter() - t0, 1), "curve": curve(rows)}
    (out / "grounding.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
