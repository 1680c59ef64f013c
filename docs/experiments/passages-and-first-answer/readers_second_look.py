"""Issue 64: the second look's independent check, on the readers' questions (data_prep/readers/questions.tsv): each
other answer the served run withheld (issue 63's readers_again.jsonl.gz) given its second look as `ask` gives it,
judged by the readers' accepted answers (whoqa.evaluation.readers.other_right).

    .venv/bin/python docs/experiments/passages-and-first-answer/readers_second_look.py --workspace ws-readers
"""
import argparse
import gzip
import json
from pathlib import Path

from whoqa.evaluation.readers import other_right
from whoqa.service.answers import Service
from whoqa.service.schema import Answer, ServiceConfig
from whoqa.service.scorers import second_look

HERE = Path(__file__).parent
ap = argparse.ArgumentParser()
ap.add_argument("--workspace", type=Path, required=True)
ap.add_argument("--served", type=Path, default=HERE.parent / "reading-and-counting" / "readers_again.jsonl.gz")
ap.add_argument("--books", type=Path, default=Path("../shared/data/books-unlabeled"))
a = ap.parse_args()
svc = Service(a.workspace, ServiceConfig())
with gzip.open(a.served, "rt") as f:
    rows = [r for r in map(json.loads, f) if r["kind"] == "other" and not r["shown"] and r.get("withheld")]
out = []
for r in rows:
    book = svc.resolve(a.books / f"{r['book']}.txt")
    ob = svc.open(book)
    query = ob.read(ob.query(r["question"]))
    route = svc.route(book, r["question"])
    first = Answer(r["question"], book, "reader", "llm", "", "", withheld=r["withheld"], found=False)
    got = second_look(svc, ob, query, route, first)
    out.append({"question": r["question"], "first": r["withheld"], "second": got.answer, "shown": bool(got.found),
                "right": bool(got.found) and other_right(got.answer, r["answers"]), "answers": r["answers"]})
    print(json.dumps(out[-1]), flush=True)
summary = {"withheld": len(out), "now shown": sum(o["shown"] for o in out), "of those right": sum(o["right"] for o in out),
           "rows": out}
(HERE / "readers_second_look.json").write_text(json.dumps(summary, indent=1) + "\n")
print({k: v for k, v in summary.items() if k != "rows"})
