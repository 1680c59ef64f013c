"""Issue 52: the 0.5B against the 1.5B as the served reader of non-Who questions on books no reader read (the main
job's 10 unseen books, 211 questions), each answered as `ask` serves it (the fused passages, grounded), from the
per-question records of `whoqa eval --workspace ws --data ws-split/unseen --kinds other [--llm qwen2.5-coder-1.5b]`
(WS/eval-data/unseen/served/other-<key>.jsonl, kept here gzipped):

    .venv/bin/python docs/experiments/grounded-answers/llm_size.py --questions ws/eval-data/unseen/questions.json \\
        --small served_other_unseen.jsonl.gz --large served_other_unseen_1.5b.jsonl.gz

(`--names` names the two arms: e.g. the 1.5B through gpt4all against llama-cpp-python on Q4_0 weights.)

Each reader is judged twice: its written answers, every one shown (withheld ones included), and as served (an answer
under the grounding threshold counts as empty). Paired ROUGE-L differences, large minus small, with 95% intervals
from resampling whole books; s/answer p50 as the records timed it."""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from whoqa.core.metrics import normalize_text, paired_book_bootstrap, rouge_l, text_metrics

HERE = Path(__file__).parent


def records(path: Path) -> dict[int, dict]:
    return {r["question_id"]: r for r in (json.loads(line) for line in gzip.open(path, "rt"))}


def texts(rows: list[dict], served: bool) -> list[str]:
    """Each answer as shown (served: only where grounded) or as written (every one)."""
    return [(r["answer"] or "") if served else (r["answer"] or r.get("withheld") or "") for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--small", type=Path, default=HERE / "served_other_unseen.jsonl.gz")
    ap.add_argument("--large", type=Path, default=HERE / "served_other_unseen_1.5b.jsonl.gz")
    ap.add_argument("--out", type=Path, default=HERE / "llm_size.json")
    ap.add_argument("--names", nargs=2, default=["0.5B", "1.5B"], help="the two arms' names (small, large)")
    a = ap.parse_args()
    gold = {q["question_id"]: [q["answer1"], q["answer2"]] for q in json.loads(a.questions.read_text())}
    small, large = records(a.small), records(a.large)
    ids = [i for i in small if i in large]  # the questions both answered (all 211 once the large run is whole)
    refs = [gold[i] for i in ids]
    books = [small[i]["book"] for i in ids]
    out = {"questions": len(ids), "books": len(set(books)), "arms": {}, "paired_rouge_l": {}}
    per = {}
    lo, hi = a.names
    for name, recs in ((lo, small), (hi, large)):
        rows = [recs[i] for i in ids]
        for served in (False, True):
            arm = f"{name}, {'served (withheld = empty)' if served else 'written (every answer shown)'}"
            t = texts(rows, served)
            m = text_metrics(t, refs)
            out["arms"][arm] = {"rouge_l": round(m["rouge_l"], 2), "meteor": round(m["meteor"], 2),
                                "bleu_1": round(m["bleu_1"], 2),
                                "answered_pct": round(100 * np.mean([bool(r["found"]) for r in rows]), 1),
                                "seconds_p50": round(float(np.median([r["seconds"] for r in rows])), 2)}
            per[(name, served)] = [[100 * rouge_l(normalize_text(x), [normalize_text(g) for g in r])]
                                   for x, r in zip(t, refs)]
            print(arm, out["arms"][arm])
    for served in (False, True):
        d = paired_book_bootstrap(np.array(per[(hi, served)]), np.array(per[(lo, served)]), books, ("rouge_l",))
        out["paired_rouge_l"]["served" if served else "written"] = d["difference"]["rouge_l"]
        print(f"{hi} - {lo}", "served" if served else "written", d["difference"]["rouge_l"])
    a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
