"""The full NarrativeQA task (Mou et al. Tables 1 and 3): every question of WS/questions.json, answered as text.

Rows: each cross-validated reader run (WS/reader/runs/<name>/) and finished LLM run, and the routed system: a Who
question of the Who set gets the memory network's top character (its canonical name; cross-validated predictions of
WS/runs/<memnet>/) where one was trained, and in a row of its own the feature ranker's (its book-level cross-validated
rankings: what `ask` serves a book no network trained on); every other question the best reader's answer, and in a
row of its own the answer of the reader its question word chose on the other book folds (whoqa.reader.routes; the
routed system, and the service's choice in WS/results/reader_routes.json, where that gained out of fold). Metrics:
ROUGE-L, METEOR, BLEU-1/4, EM, F1 (nlg-eval / SQuAD conventions) and rouge-score's ROUGE-L, over all questions and
(ROUGE-L) over the Who set alone.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

from whoqa.core.store import load_questions, load_who_set
from whoqa.core.files import atomic_write
from whoqa.core.metrics import normalize_text, rouge_l, text_metrics
from whoqa.core.runs import RUN_CONFIG, code_version, reranks
from whoqa.core.workspace import Workspace
from whoqa.memnet.ensemble import read_fold_files
from whoqa.ranker.fits import read_summary, workspace_fits
from whoqa.ranker.scores import who_names
from whoqa.reader.train import current_folds
from whoqa.llm.config import LLMConfig, llm_answer_options, model_name
from whoqa.llm.runs import llm_runs, read_llm_summary
from whoqa.reader.train import read_run
from whoqa.memnet.choose import choose_run as choose_memnet
from whoqa.reader.choose import choose_run as choose_reader
from whoqa.core.questions import question_kind
from whoqa.reader.routes import RouteConfig, write_routes
from whoqa.service.routing import by_word_serves, word_routes

log = logging.getLogger(__name__)
MOU_TEST_ROUGE_L = {"BART, no context": 16.83, "BM25 + BART": 24.47, "best (ranker + FiD + preread)": 29.21,
                    "oracle IR (BM25 w/ Q+A) + BART": 39.32}


def reader_runs(workspace: Path) -> dict[str, dict[int, str]]:
    """run name -> {question_id: generated answer}, for runs whose every fold is finished."""
    out = {}
    for run in sorted((Workspace(workspace).reader_runs).glob("*/")):
        if not (run / RUN_CONFIG).is_file():
            continue
        folds, done = current_folds(Path(workspace), run)
        if len(done) < folds:
            log.warning("reader run %s has %d of %d folds with its current config: left out (run its `whoqa reader "
                        "train` again to finish)", run.name, len(done), folds)
            continue
        out[run.name] = {p["question_id"]: p["prediction"] for d in done for p in d["predictions"]}
    return out


def memnet_answers(workspace: Path, run: str) -> dict[int, str]:
    """question id -> canonical name of the top-ranked character (trial 0 of each fold)."""
    ws = Workspace(workspace)
    names = who_names(ws)
    out = {}
    for r in read_fold_files(ws.runs / run):
        if r["trial"] != 0:
            continue
        for p in r["predictions"]:
            if p["ranking"]:
                out[p["question_id"]] = names[p["book"]].get(p["ranking"][0], "")
    return out


def reranked_answers(workspace: Path, run: str) -> dict[str, dict[int, str]]:
    """For each LLM re-ranking of a memory-network run (`whoqa rerank`, the network's candidates or the feature
    ranker's, which judges on the run's folds): its name -> question id -> the name of the combined top character."""
    ws = Workspace(workspace)
    who = {q["question_id"]: q["document_id"] for q in load_who_set(ws)[1]}
    names = who_names(ws)
    out = {}
    for folder in reranks(ws.runs / run):
        s = read_summary(folder)
        if not s or s.get("config", {}).get("candidates", "network") == "book-frequency" or "rankings" not in s:
            continue
        out[f"{run}+{folder.name}"] = {int(q): names[who[int(q)]].get(r[0], "") for q, r in
                                             s["rankings"].items() if r and int(q) in who}
    return out


def feature_answers(workspace: Path) -> tuple[str, dict[int, str]] | None:
    """The feature ranker's cross-validated Who answers, as `ask` serves a new book: (its fit's name, question id ->
    the name of its top character) from the fit `served_fit` would serve with the default LLM (`whoqa rerank
    --candidates features`, book folds first), else with another LLM; None when the workspace has none."""
    ws = Workspace(workspace)
    for run, folder in dict.fromkeys(workspace_fits(ws, model_name(LLMConfig.base)) + workspace_fits(ws, "*")):
        answers = reranked_answers(ws, run).get(f"{run}+{folder.name}")
        if answers:
            return f"{run}+{folder.name}", answers
    return None


def evaluate_full_task(workspace: Path, reader_run: str | None = None, memnet_run: str | None = None) -> dict | None:
    """Rows for every finished reader run and the routed system -> WS/results/full_task.{json,txt}; None when no
    reader run exists yet."""
    ws = Workspace(workspace)
    runs = reader_runs(ws)
    llms = llm_runs(ws)
    if not runs and not llms:
        return None
    questions = [q for qs in load_questions(ws).values() for q in qs]
    refs = {q["question_id"]: [q["answer1"], q["answer2"]] for q in questions}
    kinds = {q["question_id"]: question_kind(q["question"]).word for q in questions}
    who_ids = {q["question_id"] for q in load_who_set(ws)[1]} if (ws.who_questions).is_file() else set()
    rows = {}
    read: dict[str, set[int]] = {}  # row -> the questions whose book what answered them read (`_read_books`)
    for name, preds in runs.items():
        cfg, fold0, summary = read_run(ws.reader_runs / name)
        lookup = fold0.get("lookup") if cfg.get("lookup") and fold0 else None
        speed = (summary or {}).get("generate_seconds_per_question")
        read[name] = set(preds) if _read_books(fold0) else set()
        rows[name] = _row(preds, refs, who_ids, {"run": str(ws.reader_runs / name), "config": cfg,
                                                 "lookup": lookup, "seconds_per_question": speed}, kinds, read[name])
    sampled: dict[int, dict] = {}  # N -> the runs on the fixed sample of N questions (--sample N)
    for name, preds in llms.items():  # zero-shot: no book was trained on, so no folds are needed
        summary = read_llm_summary(ws.llm_runs / name)
        cfg = summary["provenance"]["config"]
        row = _row(preds, refs, who_ids, {"run": str(ws.llm_runs / name), "config": cfg, "zero_shot": True,
                                          "seconds_per_question": summary["seconds_per_question"]}, kinds)
        if cfg.get("sample"):
            sampled.setdefault(len(preds), {})[name] = (row, set(preds))
        else:
            rows[name], runs[name], read[name] = row, preds, set()  # (zero-shot: it read no book)
    routable = {n: r["metrics"]["rouge_l"] for n, r in rows.items() if r["config"].get("context") != "oracle"}
    reader_choice = choose_reader(ws, routable, reader_run)  # the oracle reads passages made from the answers
    memnet_choice = choose_memnet(ws, memnet_run)
    features = feature_answers(ws)
    by_word = word_routes(runs, routable, refs, who_ids, kinds, questions) if reader_choice else None
    write_routes(ws.results, by_word, {n: reader_record(rows[n]) for n in routable},
                 {"config": asdict(RouteConfig()), "code": code_version()})
    routing, routed_rows = None, {}  # the routed rows' answers, for the samples' tables
    who_routes = []  # (name, answers, by, why): the feature ranker's (what `ask` serves a book no network trained on),
    if features:     # then the memory network's where one was trained: the last one is the routed system
        who_routes.append((*features, "features", "Who: the feature ranker's book-level cross-validated answers"))
    if memnet_choice:
        who_routes.append((memnet_choice.name, memnet_answers(ws, memnet_choice.name), "memnet", memnet_choice.why))
    if reader_choice and who_routes:
        base = reader_choice.name
        for name, who_answers, who_by, why in who_routes:
            readers = {q: base for q in runs[base]}
            routed = {qid: who_answers.get(qid, text) for qid, text in runs[base].items()}
            # the memory network trained on its Who questions' books (their other questions, their artificial
            # ones: question-level folds); the feature ranker's answers are book-level cross-validated
            read_routed = {q for q in routed if (q in read[base] and q not in who_answers)
                           or (who_by == "memnet" and q in who_answers)}
            routing = {"reader": base, who_by: name,
                       f"who_questions_to_{who_by}": sum(1 for q in runs[base] if q in who_answers),
                       "chosen_by": [reader_choice.why, why]}
            rows[f"routed: {name} + {base}"] = _row(routed, refs, who_ids, routing, kinds, read_routed)
            routed_rows[f"routed: {name} + {base}"] = routed
            if by_word:  # every other question to the reader its question word chose on the other book folds
                by_routed = {qid: who_answers.get(qid, by_word.answers.get(qid, text))
                             for qid, text in runs[base].items()}
                by_routing = {**routing, "word_routes": word_summary(by_word), "chosen_by": [
                    reader_choice.why, WORD_WHY.format(n=len(by_word.scores), default=by_word.default), why]}
                read_by = {q for q in by_routed if (who_by == "memnet" and q in who_answers) or (
                    q not in who_answers and q in read.get(by_word.by.get(q, base), set()))}
                rows[f"routed by question word: {name} + readers"] = _row(by_routed, refs, who_ids, by_routing, kinds,
                                                                          read_by)
                routed_rows[f"routed by question word: {name} + readers"] = by_routed
                if by_word_serves(by_word.paired):  # what the service serves (whoqa.service.routing's one rule)
                    readers.update(by_word.by)
                    routed, routing = by_routed, by_routing
        atomic_write(ws.results / "full_task_predictions.json", json.dumps(
            {str(q): {"answer": a, "by": who_by if q in who_answers else "reader"}
             | ({} if q in who_answers else {"reader": readers[q]}) for q, a in routed.items()}, indent=1))
    samples = {}
    for n, srows in sorted(sampled.items()):  # every full-task row again on the sample's questions, beside its runs
        ids = set.intersection(*(q for _, q in srows.values()))
        full = {name: dict(runs[name]) for name in rows if name in runs} | routed_rows
        srows_all = {name: row for name, (row, _) in srows.items()}
        who_answers = {}  # each sampled LLM with the memory network (and its LLM re-rankings), the feature ranker
        if memnet_choice:
            who_answers = {memnet_choice.name: memnet_answers(ws, memnet_choice.name),
                           **reranked_answers(ws, memnet_choice.name)}
        if features:
            who_answers[features[0]] = features[1]
        if who_answers:
            for name, (_, _) in srows.items():
                preds = llms[name]
                for mname, answers in who_answers.items():
                    routed_s = {q: answers.get(q, a) for q, a in preds.items()}
                    srows_all[f"routed: {mname} + {name}"] = _row(routed_s, refs, who_ids, {}, kinds)
        samples[str(n)] = {"questions": len(ids), "rows": {
            **{name: _row({q: a for q, a in preds.items() if q in ids}, refs, who_ids, {}, kinds)
               for name, preds in full.items()},
            **srows_all}}
    out = {"questions": len(questions), "who_questions": len(who_ids), "rows": rows, "routing": routing,
           "samples": samples,
           "mou2021_test_rouge_l": MOU_TEST_ROUGE_L, "code": code_version()}
    atomic_write(ws.results / "full_task.json", json.dumps(out, indent=1))
    table = format_full_task(out)
    atomic_write(ws.results / "full_task.txt", table + "\n")
    out["table"] = table
    return out


WORD_WHY = ("other questions: per question word, the reader with the best ROUGE-L on the other book folds' "
            "questions (nested, {n} words; default {default})")


def reader_record(row: dict) -> dict:
    """What the service needs to serve a routed reader: an LLM run's model, runtime and answer options (rendering,
    shortening, passages ...), a FiD run's context."""
    cfg = row["config"]
    if row.get("zero_shot"):
        return {"kind": "llm", "model": model_name(cfg["base"]), "runtime": cfg.get("runtime"),
                "options": llm_answer_options(cfg)}
    return {"kind": "fid", "context": cfg.get("context")}


def word_summary(routes) -> dict:
    """What a by-word routing chose, for full_task.json: the choice on every book, each fold's, the readers' ROUGE-L
    per word, the paired difference against the default reader."""
    return {"served": routes.served, "folds": routes.folds, "default": routes.default,
            "rouge_l_by_word": routes.scores, "paired_vs_default": routes.paired,
            "answered_by": {r: sum(1 for x in routes.by.values() if x == r) for r in sorted(set(routes.by.values()))}}


def _read_books(fold0: dict | None) -> bool:
    """Whether a FiD run's reader read the books it answers about before their questions: book folds never train on
    a test book, but prereading or answer lookup over every book (`--books all`) reads them."""
    fold0 = fold0 or {}
    return any((fold0.get(stage) or {}).get("books") == "all" for stage in ("preread", "lookup"))


def _row(preds: dict[int, str], refs: dict[int, list[str]], who_ids: set[int], extra: dict,
         kinds: dict[int, str] | None = None, read: set[int] | None = None) -> dict:
    """A full-task row: its text metrics, on the Who questions alone, and ("unread") on the questions whose book
    nothing that answered them had read (trained on or preread: `read`, those questions' ids), the figure for a
    user's own book."""
    ids = sorted(q for q in preds if q in refs)
    m = text_metrics([preds[q] for q in ids], [refs[q] for q in ids])
    who = [q for q in ids if q in who_ids]
    m_who = text_metrics([preds[q] for q in who], [refs[q] for q in who]) if who else {"rouge_l": 0.0}
    unread = [q for q in ids if q not in (read or set())]
    out = {**extra, "metrics": m, "who_rouge_l": m_who["rouge_l"], "who_n": len(who),
           "unread_rouge_l": 100 * sum(rouge_l(normalize_text(preds[q]), [normalize_text(a) for a in refs[q]])
                                       for q in unread) / len(unread) if unread else None, "unread_n": len(unread)}
    if kinds:  # ROUGE-L and F1 per question word
        groups: dict[str, list[int]] = {}
        for q in ids:
            groups.setdefault(kinds.get(q, "other"), []).append(q)
        out["by_question_word"] = {w: {k: round(v, 2) for k, v in text_metrics(
            [preds[q] for q in qs], [refs[q] for q in qs]).items() if k in ("rouge_l", "f1", "n")}
            for w, qs in sorted(groups.items(), key=lambda kv: -len(kv[1]))}
    return out


def _figures(r: dict) -> str:
    """A row's figures under the full-task table's header."""
    m = r["metrics"]
    met = f"{m['meteor']:>8.2f}" if "meteor" in m else f"{'-':>8}"
    unread = r.get("unread_rouge_l")
    unread = f"{'-':>8}" if unread is None else f"{unread:>8.2f}" + (
        f" ({r['unread_n']})" if r["unread_n"] < r["metrics"]["n"] else "")
    return (f"{m['rouge_l']:>8.2f}{met}{m['bleu_1']:>8.2f}{m['bleu_4']:>8.2f}{m['em']:>7.2f}{m['f1']:>7.2f}"
            f"{m['rouge_l_f1_rouge_score']:>8.2f}{r['who_rouge_l']:>8.2f}{unread}")


def format_full_task(out: dict) -> str:
    lines = [f"Full task: {out['questions']} questions ({out['who_questions']} in the Who set); readers "
             "cross-validated over book folds",
             f"{'system':<52}{'ROUGE-L':>8}{'METEOR':>8}{'BLEU-1':>8}{'BLEU-4':>8}{'EM':>7}{'F1':>7}{'RL(rs)':>8}"
             f"{'RL Who':>8}{'unread':>8}"]
    for name, r in out["rows"].items():
        lines.append(f"{name:<52}" + _figures(r))
    first = next((r["by_question_word"] for r in out["rows"].values() if "by_question_word" in r), {})
    words = list(first)
    if words:  # ROUGE-L per question word: where each reader gains or loses
        lines.append("ROUGE-L by question word (questions): "
                     + ", ".join(f"{w} ({first[w]['n']})" for w in words))
        lines.append(f"{'system':<52}" + "".join(f"{w:>8}" for w in words) + f"{'s/q':>8}")
        for name, r in out["rows"].items():
            by = r.get("by_question_word", {})
            lines.append(f"{name:<52}" + "".join(f"{by[w]['rouge_l']:>8.2f}" if w in by else f"{'-':>8}" for w in words)
                         + (f"{r['seconds_per_question']:>8.2f}" if r.get("seconds_per_question") else f"{'':>8}"))
    if any(r.get("zero_shot") for r in out["rows"].values()):
        lines.append("llm[...] rows: a local language model, zero-shot (nothing trained; s/q = seconds per question)")
    if out.get("routing") and out["routing"].get("chosen_by"):
        lines.append("routed: " + "; ".join(out["routing"]["chosen_by"]))
    words = next((r["word_routes"] for n, r in out["rows"].items() if "word_routes" in r), None)
    if words:  # the by-word rows: how they chose, and what they gained out of fold
        d = words["paired_vs_default"]["difference"]["rouge_l"]
        lines.append(f"routed by question word: each word's reader chosen on the other book folds' questions; against "
                     f"{words['default']} alone on the {sum(words['answered_by'].values())} questions outside the Who "
                     f"set {d['mean']:+.2f} ROUGE-L (95% over books {d['ci95'][0]:+.2f} to {d['ci95'][1]:+.2f}): "
                     + ("served" if by_word_serves(words["paired_vs_default"]) else
                        "not served (the single best reader is)"))
    for n, sample in out.get("samples", {}).items():
        lines.append(f"\nA fixed sample of {sample['questions']} questions (`reader llm --sample {n}`; the "
                     f"rows above on the same questions first)")
        for name, r in sample["rows"].items():
            lines.append(f"{name:<52}" + _figures(r)
                         + (f"  {r['seconds_per_question']:.2f} s/q" if r.get("seconds_per_question") else ""))
    synonyms = [r["metrics"].get("meteor_synonyms") for r in out["rows"].values()]
    lines.append("METEOR: NLTK's, " + ("with WordNet synonyms" if all(synonyms) else
                                       "exact and stem matches only (no WordNet data: python -m nltk.downloader "
                                       "wordnet)" if not any(synonyms) else "WordNet synonyms in some rows only")
                 + "; - where a row was scored before METEOR was added (run `whoqa eval` again)")
    lines.append("unread = ROUGE-L on the questions whose book nothing that answered them had trained on or preread "
                 "(as a user's own book; their number in brackets where some were read)")
    lines.append("RL(rs) = rouge-score's ROUGE-L F1; RL Who = ROUGE-L on the Who-set questions alone. Mou et al. "
                 "(test ROUGE-L): " + ", ".join(f"{k} {v}" for k, v in out["mou2021_test_rouge_l"].items()))
    return "\n".join(lines)
