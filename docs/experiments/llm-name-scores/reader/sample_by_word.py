"""Per question word, on the 200-question sample: ROUGE-L of a bert2bert run (all 1,200 answered, book folds; fid[none]
unless `--fid NAME` comes first) against each LLM sample run; questions outside the Who set only (routing by word
touches those)."""
import collections, sys
from whoqa.core.workspace import Workspace
from whoqa.evaluation.fulltask import reader_runs
from whoqa.llm.runs import read_predictions
from whoqa.reader.routes import per_question_rouge, question_word
from whoqa.core.store import load_questions, load_who_set
ws = Workspace("ws41")
qs = [q for b, l in load_questions(ws).items() for q in l]
refs = {q["question_id"]: [q["answer1"], q["answer2"]] for q in qs}
text = {q["question_id"]: q["question"] for q in qs}
who = {q["question_id"] for q in load_who_set(ws)[1]}
args = sys.argv[1:]
name = "fid[none]"
if args[:1] == ["--fid"]:
    name, args = args[1], args[2:]
fid = reader_runs(ws)[name]
for run in args:
    preds = {k: r["prediction"] for k, r in read_predictions(ws.llm_runs / run / "predictions.jsonl").items()}
    ids = [q for q in preds if q not in who]
    a, b = per_question_rouge({q: preds[q] for q in ids}, refs), per_question_rouge({q: fid[q] for q in ids}, refs)
    by = collections.defaultdict(list)
    for q in ids:
        by[question_word(text[q])].append(q)
    print(run, f"{len(ids)} questions outside the Who set: LLM {sum(a.values())/len(ids):.2f} {name} {sum(b.values())/len(ids):.2f}")
    for w, l in sorted(by.items(), key=lambda x: -len(x[1])):
        print(f"  {w:6s} n={len(l):3d}  LLM {sum(a[q] for q in l)/len(l):6.2f}  {name} {sum(b[q] for q in l)/len(l):6.2f}")
