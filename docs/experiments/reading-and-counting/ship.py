"""Issue 63: write a written-first fit (`--arm written-first|written-only|written-mix`) into whoqa/ranker/shipped.json, with its provenance: the fit on all 254
questions that `two_stages_written.py --seed 13 --arm ARM --written FILE` saved in the workspace (the
other fold seeds' rows measure it: two_stages_written.jsonl), the written answers' recipe in its prompt (the reader
that wrote them and the passages it read), so serving reads what was measured.

    .venv/bin/python docs/experiments/reading-and-counting/ship.py --workspace ws51 \
        --written docs/experiments/reading-and-counting/written_pool_1.5b.jsonl.gz --passages pool --arm written-only
"""
import argparse
import datetime
import json
import statistics
from pathlib import Path

from whoqa.core.runs import file_digest
from whoqa.ranker.fits import SHIPPED, saved_ranker

HERE = Path(__file__).parent
FIT = ("features+by-book/rerank@qwen2.5-coder-0.5b-instruct-q4_k_m.q4_0+k5+features+shots0+llama-cpp-python/"
       "summary+cast+f-book_share-context_mentions-named-book_role-book_role_with_args+{}+written-{}.json")
PARTS = {"written-first": "writtenfirst", "written-only": "writtenfirst+writtenonly",
         "written-mix": "writtenfirst+writtenonly+writtenmix"}

ap = argparse.ArgumentParser()
ap.add_argument("--workspace", type=Path, required=True)
ap.add_argument("--written", type=Path, required=True, help="the written answers the fit read (written.py's file)")
ap.add_argument("--passages", required=True, help="the fusion those answers were read from (PassageConfig.fusion)")
ap.add_argument("--writer", default="qwen2.5-coder-1.5b", help="the LLM that wrote them")
ap.add_argument("--arm", choices=PARTS, default="written-only", help="two_stages_written.py's arm")
ap.add_argument("--again-from", type=Path, help="--written was made from this file's rows, asked once more where the "
                "reader wrote only the question's own person (written.py --again-from): serving asks so too")
a = ap.parse_args()

digest = file_digest(a.written)
summary = json.loads((a.workspace / "runs" / FIT.format(PARTS[a.arm], digest[:8])).read_text())
rows = [json.loads(line) for line in (HERE / "two_stages_written.jsonl").open()]
rows = [r for r in rows if r["arm"] == a.arm and r["written"] == a.written.name]
seeds = {r["seed"]: r for r in rows}  # (the last row of each seed)
if sorted(seeds) != [13, 14, 15]:
    raise SystemExit(f"two_stages_written.jsonl has {a.arm} rows for seeds {sorted(seeds)} with {a.written.name}:"
                     f" run two_stages_written.py for 13, 14 and 15 first")


def spread(key, nd=2, scale=1.0):
    v = [seeds[s]["with_llm"][key] * scale if key != "ece" else seeds[s]["ece"] for s in (13, 14, 15)]
    return f"{statistics.mean(v):.{nd}f} \u00b1 {statistics.pstdev(v):.{nd}f}"


old = json.loads(SHIPPED.read_text())
ranker = dict(summary["ranker"])
# the name scores' prompt as the shipped fit records it (the 0.5B by name, its weights requantised to Q4_0: the CV ran
# on that file), and the written answers' recipe
ranker["prompt"] = {**old["ranker"]["prompt"], "written_llm": a.writer, "written_passages": a.passages}
ranker["prompt"].pop("written_again", None)
if a.again_from:
    ranker["prompt"]["written_again"] = True
ranker["source"] = "the 254 Who questions of the 41 shared books (book-level CV: docs/who-ranker.md)"
saved_ranker(ranker, "the new fit")  # (refused here, not at serving, if it is not today's features)
provenance = {**old["provenance"],  # (what it keeps: the data, the 0.5B's weights and form, the candidates, the prompt)
    "made": datetime.date.today().isoformat(),
    "command": old["provenance"]["command"].split(" && python ")[0]
    + f" && python docs/experiments/reading-and-counting/written.py --workspace ws51 --fusion {a.passages} --out "
    + (f"{a.again_from} && python docs/experiments/reading-and-counting/written.py --workspace ws51 --fusion {a.passages} "
       f"--again-from {a.again_from} --out {a.written}" if a.again_from else f"{a.written}")
    + f" && python docs/experiments/reading-and-counting/two_stages_written.py --workspace ws51 --gguf Q40.gguf --seed S"
    f" --written {a.written} --arm {a.arm} (S = 13, 14, 15; this fit: seed 13's, on all 254 questions)"
    f" && python docs/experiments/reading-and-counting/ship.py --workspace ws51 --written {a.written} --passages {a.passages}"
    f" --arm {a.arm}" + (f" --again-from {a.again_from}" if a.again_from else ""),
    "written": f"{a.writer} (llama-cpp-python, as `ask` answers other questions) writing the answer from the "
               f"question's '{a.passages}' passages, linked to the cast (whoqa.ranker.written); {a.written.name} "
               f"sha256 {digest}",
    "written_first": "where the written answer links to a candidate it goes first, with the share of the fit's "
                     "questions it was right in: [where counting also put it first, where it did not]"
                     + ("; there the 0.5B scores no names and the first stage orders the rest (written_only)"
                        if a.arm in ("written-only", "written-mix") else ", counting being both stages")
                     + ("; it takes its place by that share among the counted probabilities, so a counted answer "
                        "surer than the reader stays first (written_mix)" if a.arm == "written-mix" else "")
                     + ("; where the reader wrote only the question's own person it was asked once more, told so "
                        "(written_again)" if a.again_from else ""),
    "book_level_cv": {"p@1": round(summary["combined"]["p@1"], 2), "p@5": round(summary["combined"]["p@5"], 2),
                      "mrr": round(summary["combined"]["mrr"], 3), "ece": round(summary["ece"], 3), "folds": 10,
                      "over_fold_seeds_13_14_15": {"p@1": spread("p@1"), "p@5": spread("p@5"),
                                                   "mrr": spread("mrr", 3), "ece": spread("ece", 3)}},
    "first_stage_cv": {k: round(summary["candidates"][k], 3 if k == "mrr" else 2) for k in ("p@1", "p@5", "mrr")},
    # (a fit that already read written answers keeps the figure of the one before any: what the reading added)
    "before": old["provenance"]["before"] if old["ranker"].get("written_first") else
    f"the fit without the written answer: {old['provenance']['book_level_cv']['over_fold_seeds_13_14_15']}",
    "replaced": f"{old['provenance'].get('written', 'the fit before')}: "
                f"{old['provenance']['book_level_cv']['over_fold_seeds_13_14_15']}"}
ranker["ece"] = round(summary["ece"], 3)
SHIPPED.write_text(json.dumps({"ranker": ranker, "provenance": provenance}, indent=1) + "\n")
print(json.dumps(provenance["book_level_cv"], indent=1))
