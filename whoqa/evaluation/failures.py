"""`whoqa failures RUN`: why a cross-validated memory-network run misses the questions it misses.

Every question of the run (its first trial's prediction, or the averaged trials with `ensemble:RUN`) gets the facts
that explain most misses: is the answer mentioned in the question's context at all, does the question name the
answer, is the answer the book's most mentioned character, did the model pick a character the question names or the
book's most mentioned one. The report counts questions and P@1 per fact and lists examples of each kind of miss
-> WS/results/failures-<run>.{json,txt}.
"""
from __future__ import annotations

import json
from pathlib import Path

from whoqa.core.files import atomic_write
from whoqa.core.runs import RUN_CONFIG, read_run_file
from whoqa.core.workspace import Workspace
from whoqa.memnet.ensemble import read_fold_files
from whoqa.core.aliases import AliasIndex
from whoqa.core.query import Query
from whoqa.core.store import load_who_set
from whoqa.evaluation.evaluate import ContextView, ensemble_result
from whoqa.memnet.data import question_tokens

FACTS = {
    "answer not in context": lambda f: not f["answer_in_context"],
    "answer named in the question": lambda f: f["answer_named"],
    "answer is the book's most mentioned": lambda f: f["answer_is_top_book"],
    "picked a character the question names": lambda f: f["picked_named"],
    "picked the book's most mentioned": lambda f: f["picked_top_book"],
}


def question_facts(workspace: Path, run: str, ranker: str = "bm25f", memories: int = 100) -> list[dict]:
    """One row per question of the run: question, answers, top 3, and the facts above."""
    ws = Workspace(workspace)
    characters, questions = load_who_set(ws)
    folder = ws.runs / run.removeprefix("ensemble:")
    runs = read_fold_files(folder)
    if not runs:
        raise FileNotFoundError(f"no fold files in {folder}: run `whoqa train --workspace {workspace}` first")
    if run.startswith("ensemble:"):
        if not all("probs" in p for r in runs for p in r["predictions"]):
            raise ValueError(f"{folder} was recorded without probabilities, so its trials cannot be averaged: ask "
                             f"for {folder.name} itself, or redo the run with `whoqa train`")
        preds = ensemble_result(run, runs, {}, {}, {"config": {}, "provenance": None}, keep_rankings=True)["rankings"]
    else:
        preds = {p["question_id"]: p["ranking"] for r in runs if r["trial"] == 0 for p in r["predictions"]}
    cfg = read_run_file(folder, RUN_CONFIG, {})
    ctx = ContextView(ws, cfg.get("ranker", ranker), cfg.get("memories", memories))
    qmap = {q["question_id"]: q for q in questions}
    aliases: dict[str, AliasIndex] = {}  # per book, built once
    rows = []
    for qid, ranking in preds.items():
        q = qmap.get(qid)
        if q is None or not ranking:
            continue
        b = q["document_id"]
        if b not in aliases:
            aliases[b] = AliasIndex.from_records(characters[b])
        chars = {c["id"]: c for c in characters[b]}
        named = {int(t.split("_")[1].split("@")[0]) for t in question_tokens(Query.read(q["question"]).about(aliases[b]), b)
                 if t.startswith("CHAR_")}
        top_book = max(chars, key=lambda c: chars[c]["count"])
        mentioned = set(ctx.mentions(b, qid))
        answers = set(q["answers"])
        rows.append({
            "question_id": qid, "book": b, "question": q["question"], "gold": q["answer1"],
            "predicted": [chars[c]["name"] for c in ranking[:3] if c in chars],
            "correct": ranking[0] in answers,
            "answer_in_context": bool(answers & mentioned), "answer_named": bool(answers & named),
            "answer_is_top_book": top_book in answers, "picked_named": ranking[0] in named,
            "picked_top_book": ranking[0] == top_book})
    return rows


def failure_report(workspace: Path, run: str, examples: int = 3) -> dict:
    rows = question_facts(workspace, run)
    n = len(rows)
    facts = {}
    for name, test in FACTS.items():
        hit = [r for r in rows if test(r)]
        facts[name] = {"questions": len(hit), "share": 100 * len(hit) / max(n, 1),
                       "p@1": 100 * sum(r["correct"] for r in hit) / max(len(hit), 1),
                       "missed": [{k: r[k] for k in ("question", "gold", "predicted")}
                                  for r in hit if not r["correct"]][:examples]}
    report = {"run": run, "questions": n, "p@1": 100 * sum(r["correct"] for r in rows) / max(n, 1), "facts": facts,
              "per_question": rows}
    ws = Workspace(workspace)
    stem = f"failures-{run.replace(':', '_')}"
    atomic_write(ws.results / f"{stem}.json", json.dumps(report, indent=1))
    atomic_write(ws.results / f"{stem}.txt", format_report(report) + "\n")
    return report


def format_report(report: dict) -> str:
    lines = [f"{report['run']}: {report['questions']} questions, P@1 {report['p@1']:.1f}",
             f"{'fact':<42}{'questions':>10}{'share %':>9}{'P@1':>7}"]
    for name, f in report["facts"].items():
        lines.append(f"{name:<42}{f['questions']:>10}{f['share']:>9.1f}{f['p@1']:>7.1f}")
    for name, f in report["facts"].items():
        for m in f["missed"]:
            lines.append(f"  [{name}] {m['question']}  gold: {m['gold']}  model: {', '.join(m['predicted'])}")
    return "\n".join(lines)
