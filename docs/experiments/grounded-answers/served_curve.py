"""Issue 52: the coverage / accuracy curve of the served non-Who answers on the main job's 10 unseen books (books no
reader read), from `whoqa eval --workspace ws --data ws-split/unseen --kinds other`'s per-question records
(served_other_unseen.jsonl.gz: each answer's grounding support and its text, shown or withheld):

    .venv/bin/python docs/experiments/grounded-answers/served_curve.py --questions ws/eval-data/unseen/questions.json
    (the 1.5B's: --records served_other_unseen_1.5b.jsonl.gz --out served_curve_1.5b.json)
"""
import argparse
import gzip
import json
from pathlib import Path

from whoqa.core.metrics import text_metrics

ap = argparse.ArgumentParser()
ap.add_argument("--questions", type=Path, required=True)
ap.add_argument("--records", type=Path, default=Path(__file__).with_name("served_other_unseen.jsonl.gz"))
ap.add_argument("--out", type=Path, default=Path(__file__).with_name("served_curve.json"))
a = ap.parse_args()
rows = [json.loads(line) for line in gzip.open(a.records, "rt")]
gold = {q["question_id"]: [q["answer1"], q["answer2"]] for q in json.loads(a.questions.read_text())}
text = [r["answer"] or r.get("withheld") or "" for r in rows]
out = []
for t in [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]:
    shown = [i for i, r in enumerate(rows) if text[i] and r["support"] >= t]
    hidden = [i for i in range(len(rows)) if i not in set(shown)]
    m = lambda idx: text_metrics([text[i] for i in idx], [gold[rows[i]["question_id"]] for i in idx]) if idx else {}
    s, h = m(shown), m(hidden)
    every = text_metrics([text[i] if i in set(shown) else "" for i in range(len(rows))],
                         [gold[r["question_id"]] for r in rows])
    out.append({"support_at_least": t, "answered_pct": round(100 * len(shown) / len(rows), 1),
                "rouge_l_answered": round(s.get("rouge_l", 0.0), 2), "meteor_answered": round(s.get("meteor", 0.0), 2),
                "rouge_l_withheld_if_shown": round(h.get("rouge_l", 0.0), 2),
                "rouge_l_all_withheld_as_empty": round(every["rouge_l"], 2), "meteor_all": round(every["meteor"], 2)})
    print(json.dumps(out[-1]))
a.out.write_text(json.dumps({"questions": len(rows), "curve": out}, indent=1))
