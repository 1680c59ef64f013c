"""Issue 64: the unseen books' other answers with the "pool" passages against the served "rrf" ones, question by
question, on the questions both files hold (a pool run may be partial: it resumes).

The pool answers: `whoqa eval --workspace EMPTY --data ws-split/unseen --kinds other --passages pool`, whose
per-question file is EMPTY/eval-data/unseen/served/other-<key>.jsonl (kept here gzipped as unseen_other_pool.jsonl.gz;
to resume on another machine, gunzip it to that path, key in its rows' "route_key", and run the command again). The
rrf answers: issue 52's served_other_unseen_1.5b_native.jsonl.gz (the 22.15 ROUGE-L of the main job).

    .venv/bin/python docs/experiments/passages-and-first-answer/pool_answers.py --target EMPTY/eval-data/unseen
"""
import argparse
import gzip
import json
from pathlib import Path

from whoqa.core.metrics import paired_book_bootstrap, text_metrics
from whoqa.evaluation.unseen import other_questions, other_scores

HERE = Path(__file__).parent
RRF = HERE.parent / "grounded-answers" / "served_other_unseen_1.5b_native.jsonl.gz"


def rows(path: Path) -> dict[int, dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    if not path.exists():
        return {}
    with opener(path, "rt", encoding="utf-8") as f:
        return {r["question_id"]: r for r in map(json.loads, f) if "question_id" in r}


def scores(got: dict, ids: list[int], refs: list[list[str]]) -> dict:
    """Served other answers' scores: shown share, "not found", ROUGE-L/METEOR over the shown, over all ("not found"
    empty), over every answer written (shown or withheld) and over the withheld ones."""
    s = other_scores([got[i] for i in ids], refs)
    return {"answer_coverage": round(s["answer_coverage"], 2), "not_found": s["not_found"],
            "rouge_l_shown": round(s["text_answered"].get("rouge_l", 0.0), 2),
            "meteor_shown": round(s["text_answered"].get("meteor", 0.0), 2),
            "rouge_l_all": round(s["text"]["rouge_l"], 2), "meteor_all": round(s["text"]["meteor"], 2),
            # every answer it wrote, shown or withheld (the reader's own quality, before grounding)
            **{f"{m}_written": round(v, 2) for m, v in text_metrics(
                [got[i]["answer"] if got[i]["found"] else got[i].get("withheld") or "" for i in ids],
                refs).items() if m in ("rouge_l", "meteor")},
            "rouge_l_withheld": round(text_metrics(
                [got[i].get("withheld") or "" for i in ids if not got[i]["found"]],
                [r for i, r in zip(ids, refs) if not got[i]["found"]])["rouge_l"], 2)}


def per_question(got: dict, ids: list[int], refs: list[list[str]]) -> list[list[float]]:
    """Each question's ROUGE-L, "not found" as an empty answer (for paired differences)."""
    return [[text_metrics([got[i]["answer"] if got[i]["found"] else ""], [r])["rouge_l"]] for i, r in zip(ids, refs)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=Path, required=True, help="the unseen books' prepared folder (eval-data/unseen)")
    ap.add_argument("--pool", type=Path, default=HERE / "unseen_other_pool.jsonl.gz")
    a = ap.parse_args()
    qs = {q["question_id"]: q for q in other_questions(a.target)}
    pool, rrf = rows(a.pool), rows(RRF)
    ids = [i for i in qs if i in pool and i in rrf]
    refs = [[qs[i]["answer1"], qs[i]["answer2"]] for i in ids]
    out = {"questions": len(ids), "of": len(qs)}
    for name, got in (("rrf", rrf), ("pool", pool)):
        out[name] = {**scores(got, ids, refs), "seconds_p50": sorted(got[i]["seconds"] for i in ids)[len(ids) // 2]}
    out["pool_minus_rrf_rouge_l_all"] = paired_book_bootstrap(
        per_question(pool, ids, refs), per_question(rrf, ids, refs), [qs[i]["document_id"] for i in ids],
        ("rouge_l",))["difference"]
    (HERE / "pool_answers.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
