"""Issue 64, item 2: a second look before "not found". Where the reader's answer is held by no passage it read, the
book is searched with the question and that answer, and read once more; the new answer is shown only where a sentence
of its passages holds it (whoqa.service.scorers.second_look, GroundingConfig.second_look).

Only the withheld answers of the served run change, so this reads the served run's rows (unseen_other_pool.jsonl.gz,
`whoqa eval --workspace EMPTY --data ws-split/unseen --kinds other`) and gives each withheld one its second look, as
`ask` would with the option on; the rest stand as served. Rows are kept in second_look.jsonl.gz (resumable).

    python docs/experiments/passages-and-first-answer/second_look.py --target EMPTY/eval-data/unseen
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from whoqa.core.metrics import paired_book_bootstrap, text_metrics
from whoqa.evaluation.unseen import other_questions
from whoqa.service.answers import Service
from whoqa.service.schema import Answer, ServiceConfig
from whoqa.service.scorers import second_look

from pool_answers import per_question, rows, scores  # (this folder's: the served answers' scores)

HERE = Path(__file__).parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=Path, required=True, help="the unseen books' prepared folder (eval-data/unseen)")
    ap.add_argument("--served", type=Path, default=HERE / "unseen_other_pool.jsonl.gz")
    ap.add_argument("--out", type=Path, default=HERE)
    a = ap.parse_args()
    qs = {q["question_id"]: q for q in other_questions(a.target)}
    served = rows(a.served)
    path = a.out / "second_look.jsonl.gz"
    looked = rows(path)
    svc = Service(a.target, ServiceConfig(), fits_from=a.target.parents[1])  # (as `eval --data` serves: its shots
    #   the shipped ones; second_look.jsonl.gz was made before this, its examples drawn from the unseen questions)
    todo = [i for i, r in served.items() if not r["found"] and r.get("withheld") and r["route"] == "llm"
            and i not in looked]
    t0 = time.perf_counter()
    for n, i in enumerate(todo, 1):
        q, r = qs[i], served[i]
        t = time.perf_counter()
        ob = svc.open(q["document_id"])
        query = ob.read(ob.query(q["question"]))
        route = svc.route(q["document_id"], q["question"])
        first = Answer(q["question"], ob.id, "reader", "llm", "", r["model"], withheld=r["withheld"], found=False,
                       support=r["support"])
        got = second_look(svc, ob, query, route, first)
        looked[i] = {**r, "answer": got.answer, "found": bool(got.found), "support": got.support,
                     "withheld": got.withheld, "second_look": got is not first,
                     "second_seconds": round(time.perf_counter() - t, 2)}
        with gzip.open(path, "at", encoding="utf-8") as f:
            f.write(json.dumps(looked[i]) + "\n")
        print(f"{n}/{len(todo)} {time.perf_counter() - t0:.0f}s found={got.found} {got.answer!r}", flush=True)
    after = {**served, **looked}
    ids = [i for i in qs if i in served]
    refs = [[qs[i]["answer1"], qs[i]["answer2"]] for i in ids]

    recovered = [i for i in looked if looked[i]["found"]]
    secs = sorted(r["second_seconds"] for r in looked.values())
    out = {"questions": len(ids), "looked again": len(looked), "now shown": len(recovered),
           "served (pool)": scores(served, ids, refs), "with the second look": scores(after, ids, refs),
           "the recovered answers' ROUGE-L": round(text_metrics(
               [looked[i]["answer"] for i in recovered],
               [[qs[i]["answer1"], qs[i]["answer2"]] for i in recovered])["rouge_l"], 2) if recovered else None,
           "second look seconds p50": secs[len(secs) // 2] if secs else None,
           "minus served, ROUGE-L counting not found as empty, resampled by book": paired_book_bootstrap(
               per_question(after, ids, refs), per_question(served, ids, refs), [qs[i]["document_id"] for i in ids],
               ("rouge_l",))["difference"]}
    (a.out / "second_look.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
