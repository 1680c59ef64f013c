"""`whoqa eval`: every system that exists, on the Who set, as a table like Angelidis et al.'s Table 2, with results
JSON (config and data fingerprint included) under WS/results/."""
from __future__ import annotations

import json
import logging
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from whoqa.evaluation.baselines import book_frequency, context_frequency, random_ranking
from whoqa.core.files import atomic_write
from whoqa.core.jobs import default_jobs
from whoqa.core.metrics import ranking_metrics, text_metrics
from whoqa.core.runs import RUN_CONFIG, RUN_FILE, RUN_SUMMARY, read_run_file, reranks
from whoqa.core.store import fingerprint, load_who_set
from whoqa.core.workspace import Workspace
from whoqa.core.seed import SEED
from whoqa.memnet.ensemble import read_fold_files
from whoqa.ranker.fits import read_summary
from whoqa.retrieval.passages import PassageConfig

log = logging.getLogger(__name__)
RANKING_KEYS = ("p@1", "p@5", "mrr")
_STOP = {"a", "an", "the", "of", "to", "in", "and", "he", "she", "his", "her", "was", "is", "it", "that", "for", "on"}


@dataclass
class EvalConfig:
    workspace: str
    data: str | None = None  # another NarrativeQA-layout folder to evaluate on (prepared under WS/eval-data/)
    seed: int = SEED
    random_trials: int = 5
    jobs: int = field(default_factory=default_jobs)  # processes preparing --data books
    context_sentences: int = 100  # context size for context-based systems and coverage
    device: str = "auto"  # where the trained models judged on --data books run (whoqa.core.device)
    adapt: bool = False  # --data: also judge the final models after test-time adaptation (cached per model and book)
    llm: str | None = None  # --data: the LLM `ask` would read with (None: the best installed; "none": without one)
    executor: str = "local"  # --data: where its books are prepared and indexed: local | ray (whoqa.core.executor)
    ray_address: str | None = None
    kinds: str = "who,other"  # --data: the questions judged: who (the Who set), other (the rest, as `ask` serves them)
    passages: str = PassageConfig.fusion  # --data, --questions: how the served answers' passages are retrieved
    other_per_book: int | None = None  # --data: judge only each book's first N other questions (None: all); their
    # results are their own files (<name>@<data>-first<N>.json), so a sample never passes for the whole

    def judged(self) -> set[str]:
        """The kinds of question judged; a one-line ValueError for an unknown kind or one that needs --data."""
        kinds = {k.strip() for k in self.kinds.split(",") if k.strip()}
        if not kinds or not kinds <= set(KINDS):
            raise ValueError(f"--kinds {self.kinds!r}: give who, other or who,other")
        if "who" not in kinds and not self.data:
            raise ValueError("--kinds other judges what `ask` serves on another folder's books: give --data DIR "
                             "(without it, `whoqa eval` judges the Who set and the full task)")
        PassageConfig(fusion=self.passages)  # (an unknown one: its one line, before any book is prepared)
        if self.other_per_book is not None and self.other_per_book < 1:
            raise ValueError(f"--other-per-book {self.other_per_book}: give 1 or more (or leave it out for all)")
        return kinds


KINDS = ("who", "other")
Ranker = Callable[[dict, list[dict], int], list[int]]  # (question, book characters, trial) -> ranked ids


def baseline_systems(seed: int) -> dict[str, tuple[Ranker, int]]:
    """name -> (ranker, trials)."""
    return {"random": (lambda q, chars, t: random_ranking(chars, seed + t, q["question_id"]), 0),
            "book_frequency": (lambda q, chars, t: book_frequency(chars), 1)}


def evaluate_system(name: str, ranker: Ranker, trials: int, characters: dict[str, list[dict]],
                    questions: list[dict]) -> dict:
    """Ranking metrics per trial (mean and std over trials), and text metrics of the first trial's top answers."""
    usable = [q for q in questions if characters.get(q["document_id"])]
    skipped = len(questions) - len(usable)
    if skipped:
        log.warning("%s: %d question(s) skipped: their book has no characters", name, skipped)
    per_trial, preds = [], []
    for t in range(trials):
        rankings = [ranker(q, characters[q["document_id"]], t) for q in usable]
        per_trial.append(ranking_metrics(rankings, [q["answers"] for q in usable]))
        if t == 0:
            names = {d: {c["id"]: c["name"] for c in cs} for d, cs in characters.items()}
            preds = [names[q["document_id"]][r[0]] if r else "" for q, r in zip(usable, rankings)]
    out = {"system": name, "trials": trials, "questions": len(usable), "skipped_no_candidates": skipped}
    for k in RANKING_KEYS:
        vals = [m[k] for m in per_trial]
        out[k] = statistics.fmean(vals)
        out[k + "_std"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
    out["text"] = text_metrics(preds, [[q["answer1"], q["answer2"]] for q in usable]) if usable else {"n": 0}
    return out


def evaluate(cfg: EvalConfig) -> dict:
    ws = Workspace(cfg.workspace)
    kinds = cfg.judged()
    target = ws
    if cfg.data:
        from whoqa.evaluation.unseen import prepare_other
        target = prepare_other(ws, cfg.data, cfg.jobs, cfg.executor, cfg.ray_address)
    characters, questions = load_who_set(target)
    systems = baseline_systems(cfg.seed) if "who" in kinds else {}
    coverage = {}
    partial = {}
    for ranker in available_rankers(target) if "who" in kinds else []:
        have = {p.stem for p in (Workspace(target).contexts / ranker).glob("*.json")}
        need = {q["document_id"] for q in questions}
        if not need <= have:  # a half-built ranker would be judged on books it has not ranked
            partial[ranker] = f"contexts for {len(need & have)} of {len(need)} books"
            log.warning("%s left out: %s; run `whoqa index --ranker %s` to finish", ranker, partial[ranker], ranker)
            continue
        ctx = ContextView(target, ranker, cfg.context_sentences)
        systems[f"context_frequency[{ranker}]"] = (
            lambda q, chars, t, ctx=ctx: context_frequency(ctx.mentions(q["document_id"], q["question_id"]), chars), 1)
        coverage[ranker] = ctx.coverage(questions)
    results, other = {}, {}
    for name, (ranker, trials) in systems.items():
        results[name] = evaluate_system(name, ranker, trials or cfg.random_trials, characters, questions)
    if cfg.data:
        from whoqa.evaluation.unseen import (final_results, other_questions, served_other_results, served_results,
                                             served_service)
        svc = served_service(ws, target, cfg.llm, cfg.device, cfg.passages)  # one service for both kinds, as `ask` has
        if "who" in kinds:
            results.update(served_results(ws, target, characters, questions, cfg.llm, cfg.device, svc=svc))
            results.update(final_results(ws, target, characters, questions, device=cfg.device, adapt=cfg.adapt))
        if "other" in kinds:
            other = served_other_results(ws, target, other_questions(target, cfg.other_per_book), cfg.llm, cfg.device,
                                         svc=svc)
    else:
        results.update(trained_results(ws, characters, questions))
    from whoqa.core.runs import code_version
    meta = {"config": asdict(cfg), "data_fingerprint": fingerprint(target), "who_set": str(Workspace(target).who),
            "code": code_version(),
            "questions": len(questions), "books": len({q["document_id"] for q in questions}),
            "coverage": coverage, "incomplete_rankers": partial}
    suffix = f"@{Path(cfg.data).name}" if cfg.data else ""
    sampled = f"-first{cfg.other_per_book}" if cfg.other_per_book else ""
    for name, res in {**results, **other}.items():  # the non-Who rows' "questions" and "books" are their own
        atomic_write(ws.results / f"{name}{suffix}{sampled * (name in other)}.json", json.dumps({**meta, **res},
                                                                                               indent=1))
    if coverage:
        atomic_write(ws.results / f"coverage{suffix}.json", json.dumps({**meta}, indent=1))
    table = format_table(results, meta) if "who" in kinds else "Who set: not judged (--kinds other)"
    if other:
        from whoqa.evaluation.unseen import format_other
        table += "\n\n" + format_other(other)
    atomic_write(ws.results / f"table{suffix}{sampled}.txt", table + "\n")
    calibrated = {n.removeprefix("ensemble:"): r["calibration"] for n, r in results.items()
                  if (n.startswith(("ensemble:", "served:")) or r.get("config", {}).get("candidates") == "features")
                  and (r.get("calibration") or {}).get("reliability")}  # what `ask` and `ask --rerank` serve
    if calibrated:
        from whoqa.core.calibration import plot_reliability
        plot_reliability(calibrated, ws.results / f"reliability{suffix}.png")
    full = None
    if cfg.data:
        from whoqa.evaluation.unseen import full_task_results
        full = full_task_results(ws, target, results, device=cfg.device)
    return {"meta": meta, "results": results, "other": other, "table": table, "full_task": full}


def trained_results(workspace: Path, characters: dict[str, list[dict]], questions: list[dict]) -> dict:
    """Cross-validated memory-network runs (WS/runs/<name>/): mean and std over folds x trials; text metrics of the
    first trial's predictions (every question is in exactly one fold)."""
    out = {}
    qmap = {q["question_id"]: q for q in questions}
    names = {d: {c["id"]: c["name"] for c in cs} for d, cs in characters.items()}
    for run in sorted((Workspace(workspace).runs).glob("*/")):
        runs = read_fold_files(run)
        if not runs:  # no network trained: a feature ranker judged on book folds of its own, if any
            out.update(reranked_results(run, qmap, names))
            continue
        res = {"system": run.name, "trials": len(runs), "questions": sum(len(r["predictions"]) for r in runs
                                                                          if r["trial"] == 0),
               "skipped_no_candidates": 0, "config": read_run_file(run, RUN_CONFIG, {}),
               "provenance": read_run_file(run, RUN_FILE)}
        for k in RANKING_KEYS:
            vals = [r["metrics"][k] for r in runs]
            res[k] = statistics.fmean(vals)
            res[k + "_std"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        preds, refs = [], []
        for r in runs:
            if r["trial"] != 0:
                continue
            for p in r["predictions"]:
                q = qmap.get(p["question_id"])
                if q and p["ranking"]:
                    preds.append(names[p["book"]].get(p["ranking"][0], ""))
                    refs.append([q["answer1"], q["answer2"]])
        res["text"] = text_metrics(preds, refs) if preds else {"n": 0}
        summary = read_run_file(run, RUN_SUMMARY, {})
        if summary.get("calibration"):
            res["ece"] = summary["calibration"]["ece"]
            res["calibration"] = summary["calibration"]
        out[run.name] = res
        if len({r["trial"] for r in runs}) > 1 and all("probs" in p for r in runs for p in r["predictions"]):
            out[f"ensemble:{run.name}"] = ensemble_result(run.name, runs, qmap, names, res)
        out.update(reranked_results(run, qmap, names))
    return out


def reranked_results(run: Path, qmap: dict, names: dict) -> dict:
    """`whoqa rerank`'s summaries of a run (the LLM re-ranking, the feature ranker), judged on the run's folds:
    their combined ranking's P@1 / P@5 / MRR, ECE where measured, and text metrics of the top name."""
    out = {}
    for folder in reranks(run):
        s = read_summary(folder)
        if not s or "combined" not in s:
            continue  # a summary being written, or from an older layout: `whoqa rerank` rewrites it
        m = s["combined"]
        preds, refs = [], []
        for q, top in s.get("rankings", {}).items():
            q = qmap.get(int(q))
            if q and top:
                preds.append(names[q["document_id"]].get(top[0], ""))
                refs.append([q["answer1"], q["answer2"]])
        out[f"{run.name}+{folder.name}"] = {
            "system": f"{run.name}+{folder.name}", "trials": 1, "questions": m["n"], "config": s.get("config", {}),
            **{k: m[k] for k in RANKING_KEYS}, **{k + "_std": 0.0 for k in RANKING_KEYS}, "ece": s.get("ece"),
            "text": text_metrics(preds, refs) if preds else {"n": 0}}
        if s.get("reliability"):
            out[f"{run.name}+{folder.name}"]["calibration"] = {
                "ece": s["ece"], "reliability": s["reliability"], "questions": s.get("questions"),
                "llm_features_fixed": {f: {"ece": v["ece"], **{k: v["combined"][k] for k in RANKING_KEYS}}
                                       for f, v in s.get("llm_features_fixed", {}).items()}}
    return out


def ensemble_result(name: str, runs: list[dict], qmap: dict, names: dict, single: dict,
                    keep_rankings: bool = False) -> dict:
    """The trials of each fold as one system: every question ranked by its characters' probability averaged over the
    trials, at the temperature fit on the other folds (`whoqa.memnet.ensemble`); "ece" is that calibration's."""
    from whoqa.core.calibration import cross_fitted
    from whoqa.memnet.ensemble import ensemble_rankings, items
    its = items(runs)
    cal = cross_fitted(its)
    rankings = ensemble_rankings(its, [cal["fold_temperatures"][str(i.group)] for i in its])
    books = {(r["fold"], p["question_id"]): p["book"] for r in runs for p in r["predictions"]}
    keys = [i.key for i in its]
    res = {"system": f"ensemble:{name}", "trials": 1, "questions": len(keys), "skipped_no_candidates": 0,
           "members": len({r["trial"] for r in runs}), "config": single["config"], "provenance": single["provenance"],
           "ece": cal["ece"], "calibration": cal}
    res.update({k: v for k, v in ranking_metrics(rankings, [[int(c) for c in i.chars[i.correct]] for i in its]).items()
                if k != "n"})
    res.update({f"{k}_std": 0.0 for k in RANKING_KEYS})
    preds = [names.get(books[k], {}).get(r[0], "") for k, r in zip(keys, rankings)]
    refs = [[qmap[k[1]]["answer1"], qmap[k[1]]["answer2"]] if k[1] in qmap else [""] for k in keys]
    res["text"] = text_metrics(preds, refs) if preds else {"n": 0}
    if keep_rankings:
        res["rankings"] = {k[1]: r for k, r in zip(keys, rankings)}
    return res


def format_table(results: dict[str, dict], meta: dict) -> str:
    width = max([22] + [len(n) + 1 for n in results])
    lines = [f"Who set: {meta['questions']} questions, {meta['books']} books (data {meta['data_fingerprint']})",
             f"{'system':<{width}}{'P@1':>16}{'P@5':>16}{'MRR':>18}{'ECE':>7}{'ROUGE-L':>10}{'BLEU-1':>8}{'EM':>7}"
             f"{'F1':>7}"]
    for name, r in results.items():
        def cell(k, fmt):
            v = fmt.format(r[k])
            return v + (" ± " + fmt.format(r[k + "_std"]) if r["trials"] > 1 else "")
        t = r["text"]
        ece = f"{r['ece']:.3f}" if r.get("ece") is not None else "-"
        lines.append(f"{name:<{width}}{cell('p@1', '{:.2f}'):>16}{cell('p@5', '{:.2f}'):>16}{cell('mrr', '{:.3f}'):>18}"
                     f"{ece:>7}{t.get('rouge_l', 0):>10.2f}{t.get('bleu_1', 0):>8.2f}{t.get('em', 0):>7.2f}{t.get('f1', 0):>7.2f}")
    for ranker, why in meta.get("incomplete_rankers", {}).items():
        lines.append(f"{ranker}: left out ({why}); run `whoqa index --ranker {ranker}` to finish")
    for ranker, c in meta.get("coverage", {}).items():
        lines.append(f"{ranker} contexts ({c['context_sentences']} sentences): correct character mentioned for "
                     f"{c['who_answer_in_context']:.1f}% of Who questions; answer-text recall (max ROUGE-L of an "
                     f"answer-length span) {c['answer_rouge_l_recall']:.1f} over {c['all_questions']} questions")
    return "\n".join(lines)


def available_rankers(workspace: Path) -> list[str]:
    from whoqa.retrieval.contexts import RANKERS
    root = Workspace(workspace).contexts
    return [r for r in RANKERS if (root / r).is_dir() and any((root / r).glob("*.json"))]


class ContextView:
    """One ranker's contexts, with the character mentions and words of their sentences."""

    def __init__(self, workspace: Path, ranker: str, limit: int):
        self.ws, self.ranker, self.limit = Workspace(workspace), ranker, limit
        self._books: dict = {}
        self._ctx: dict = {}

    def _load(self, book_id: str):
        from whoqa.core.book import Book
        from whoqa.retrieval.contexts import load_contexts
        if book_id not in self._books:
            self._books[book_id] = Book.load(self.ws.books / book_id, book_id)
            self._ctx[book_id] = load_contexts(self.ws, self.ranker, book_id) or {}
        return self._books[book_id], self._ctx[book_id]

    def book(self, book_id: str):
        return self._load(book_id)[0]

    def sentences(self, book_id: str, question_id: int) -> list[int]:
        from whoqa.retrieval.contexts import question_context
        _, ctx = self._load(book_id)
        return question_context(ctx, question_id, self.limit)

    def mentions(self, book_id: str, question_id: int) -> list[int]:
        book, _ = self._load(book_id)
        return [m.char_id for s in self.sentences(book_id, question_id) for m in book.sentence_mentions(s)]

    def coverage(self, who_questions: list[dict]) -> dict:
        from whoqa.core.store import load_questions
        hit = sum(1 for q in who_questions if set(q["answers"]) & set(self.mentions(q["document_id"], q["question_id"])))
        scores = []
        for book_id, qs in load_questions(self.ws).items():
            if not (self.ws.contexts_file(self.ranker, book_id)).is_file():
                continue
            book, _ = self._load(book_id)
            for q in qs:
                words = [w.lower() for s in self.sentences(book_id, q["question_id"]) for w in book.sentence_words(s)]
                scores.append(span_recall(words, [q["answer1"], q["answer2"]]))
        return {"context_sentences": self.limit, "who_questions": len(who_questions),
                "who_answer_in_context": 100 * hit / len(who_questions) if who_questions else 0.0,
                "all_questions": len(scores),
                "answer_rouge_l_recall": 100 * sum(scores) / len(scores) if scores else 0.0}


def span_recall(context_words: list[str], answers: list[str]) -> float:
    """Max ROUGE-L of any answer-length span of the context against the answers (Mou et al. Table 2): how much of
    an answer the context holds verbatim. Only spans sharing a word with the answer are scored."""
    from whoqa.core.metrics import normalize_text, rouge_l
    text = normalize_text(" ".join(context_words)).split(" ")
    best = 0.0
    for ans in answers:
        a = normalize_text(ans).split(" ")
        if not a or a == [""]:
            continue
        vocab = {w for w in a if w.isalnum() and w not in _STOP} or set(a)
        starts = {max(0, i - len(a) + 1 + k) for i, w in enumerate(text) if w in vocab for k in range(len(a))}
        for st in starts:
            span = text[st:st + len(a)]
            if span:
                best = max(best, rouge_l(" ".join(span), [" ".join(a)]))
        if best == 1.0:
            break
    return best
