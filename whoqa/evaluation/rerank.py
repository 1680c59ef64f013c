"""Who answers re-ranked by a local LLM that reads the question's passages: a second, book-independent opinion.

The memory network's cross-validated run gives each question its calibrated ensemble probabilities (its fold's
trials, the temperature fit on the other folds, `whoqa.memnet.ensemble`). Its top k characters are then scored by the
LLM: the log-likelihood of each character's name as the answer after the passages and the question
(`LLMReader.name_scores`), normalised over the k names. The two are combined as

    score(c) = log p_memnet(c) + w * log p_llm(c)        for c in the top k (the rest keep the network's order)

with the one weight w fit, for the questions of fold f, on the other folds' questions only (the mean reciprocal rank
of the right character among the k; the smallest of equal weights). A by-book run makes this the new-book measure: neither the network nor w ever saw
the judged book. The LLM's scores are kept per question (WS/runs/<run>/rerank@<model>/scores.jsonl) and resumable.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from whoqa.core.book import atomic_write
from whoqa.core.calibration import probabilities
from whoqa.core.metrics import ranking_metrics
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import digest
from whoqa.core.seed import SEED
from whoqa.core.workspace import Workspace
from whoqa.evaluation.baselines import book_frequency
from whoqa.evaluation.fulltask import who_names
from whoqa.memnet.ensemble import cross_fitted, items
from whoqa.reader.config import LLMConfig, RerankConfig, model_name
from whoqa.reader.data import build_examples
from whoqa.reader.llm import LLMReader, few_shots, model_fingerprint

# the LLM's weights tried (one number per fold: a grid is enough); 100 is the LLM's order alone, ties to the network's
WEIGHTS = np.array([0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0])


CANDIDATES = ("network", "book-frequency")


def rerank_dir(workspace: Path, run: str, cfg: RerankConfig) -> Path:
    model = model_name(cfg.base)
    source = "" if cfg.candidates == "network" else f"+{cfg.candidates}"
    return Workspace(workspace).runs / run / f"rerank@{model}+k{cfg.top_k}{source}"


def frequency_candidates(workspace: Path, cands: list[dict]) -> list[dict]:
    """The same questions (and folds) with book frequency's ranking instead: the book's characters by mentions, the
    probabilities their shares of the mentions."""
    chars = json.loads((Workspace(workspace).who / "characters.json").read_text())
    who = {q["question_id"]: q["document_id"] for q in
           json.loads((Workspace(workspace).who / "who_questions.json").read_text())}
    out = []
    for c in cands:
        cs = chars[who[c["question_id"]]]
        count = {x["id"]: x["count"] for x in cs}
        total = sum(count.values()) or 1
        ranking = book_frequency(cs)  # the baseline's own order (ties by id)
        out.append({**c, "ranking": ranking, "probs": [count[x] / total for x in ranking]})
    return out


def network_candidates(run_dir: Path) -> list[dict]:
    """Per question of a cross-validated run: its fold, the characters by calibrated ensemble probability (best
    first), those probabilities, and the right characters."""
    runs = [json.loads(p.read_text()) for p in sorted(Path(run_dir).glob("fold*_trial*.json"))]
    if not runs:
        raise FileNotFoundError(f"{run_dir} has no fold files: run `whoqa train --folds 10` first")
    its = items(runs)
    temps = cross_fitted(its)["fold_temperatures"]
    out = []
    for it in its:
        p = probabilities(it.scores, temps[str(it.group)])  # (C,)
        order = np.argsort(-p, kind="stable")
        out.append({"question_id": int(it.key[1]), "fold": int(it.group), "ranking": [int(it.chars[i]) for i in order],
                    "probs": [float(p[i]) for i in order], "answers": [int(c) for c in it.chars[it.correct]]})
    return out


def score_run(workspace: Path, run: str, cfg: RerankConfig, progress: bool = True, device=None) -> list[dict]:
    """The LLM's log-likelihood of each question's top-k names -> scores.jsonl (resumable per question; a changed
    config or model starts it afresh)."""
    ws = Workspace(workspace)
    if cfg.candidates not in CANDIDATES:
        raise ValueError(f"unknown candidates {cfg.candidates!r}: use one of {', '.join(CANDIDATES)}")
    cands = network_candidates(ws.runs / run)[:cfg.max_eval_samples]
    if cfg.candidates == "book-frequency":
        cands = frequency_candidates(ws, cands)
    folder = rerank_dir(ws, run, cfg)
    folder.mkdir(parents=True, exist_ok=True)
    recipe = asdict(cfg) | {"max_eval_samples": None}
    if cfg.candidates == "network":  # (a field added later: scores made before it stay valid)
        del recipe["candidates"]
    key = digest([recipe, model_fingerprint(cfg.base)])
    path = folder / "scores.jsonl"
    done = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interruption: that question is scored again
            if row.get("key") == key:
                done[row["question_id"]] = row
    todo = [c for c in cands if c["question_id"] not in done]
    if todo:
        names = who_names(ws)
        who = {q["question_id"]: q for q in json.loads((ws.who / "who_questions.json").read_text())}
        examples = {e.question_id: e for e in build_examples(ws, "bm25f", cfg.passages, progress=False)}
        pool = [(q["question"], q["answer1"], q["document_id"]) for q in who.values()]
        reader = LLMReader(cfg.base, device, cfg.prompt_tokens, runtime="transformers")
        bar = progress_bar(total=len(cands), desc=f"rerank {run}", unit="q", progress=progress)
        bar.update(len(done))
        with path.open("a") as out:
            for c in todo:
                t = time.perf_counter()
                q = who[c["question_id"]]
                e = examples.get(c["question_id"])
                top = c["ranking"][:cfg.top_k]
                shots = few_shots(pool, q["document_id"], cfg.shots, SEED * 1_000_003 + c["question_id"])
                llm = reader.name_scores(q["question"], e.passages if e else [], [names[q["document_id"]][x]
                                                                                     for x in top],
                                         shots, e.starts if e else None, LLMConfig.order)
                row = {"question_id": c["question_id"], "key": key, "candidates": top, "llm": llm,
                       "seconds": round(time.perf_counter() - t, 3)}
                out.write(json.dumps(row) + "\n")
                out.flush()
                done[c["question_id"]] = row
                bar.update(1)
        bar.close()
    return [{**c, "llm": done[c["question_id"]]["llm"], "seconds": done[c["question_id"]]["seconds"]}
            for c in cands]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def combined(row: dict, w: float) -> list[int]:
    """The question's ranking with its top k reordered by log p_memnet + w * log p_llm."""
    k = len(row["llm"])
    mem = np.log(np.maximum(np.array(row["probs"][:k]), 1e-12))  # (k,)
    s = mem + w * _log_softmax(np.array(row["llm"]))  # (k,)
    top = [row["ranking"][i] for i in np.argsort(-s, kind="stable")]
    return top + row["ranking"][k:]


def _mrr(rows: list[dict], w: float) -> float:
    """Mean reciprocal rank of the right character over the questions that have it in the top k (the others do not
    move)."""
    ranks = []
    for r in rows:
        k = len(r["llm"])
        if any(c in r["answers"] for c in r["ranking"][:k]):
            order = combined(r, w)
            ranks.append(1 / (1 + next(i for i, c in enumerate(order) if c in r["answers"])))
    return float(np.mean(ranks)) if ranks else 0.0


def fit_weight(rows: list[dict]) -> float:
    """The weight with the best MRR on these questions; the smallest of equals (the network's order unless the LLM
    earns a say)."""
    scores = [_mrr(rows, w) for w in WEIGHTS]
    return float(WEIGHTS[int(np.argmax(np.round(scores, 9)))])


def evaluate(rows: list[dict]) -> dict:
    """The candidates' own order (the network's or book frequency's), the LLM alone over their top k, and the two
    combined with w fit per fold on the other folds."""
    folds = sorted({r["fold"] for r in rows})
    fitted = {f: fit_weight([r for r in rows if r["fold"] != f]) for f in folds}
    answers = [r["answers"] for r in rows]
    llm_only = [[r["ranking"][i] for i in np.argsort(-np.array(r["llm"]), kind="stable")] + r["ranking"][len(r["llm"]):]
                for r in rows]
    out = {"questions": len(rows), "top_k": max(len(r["llm"]) for r in rows),
           "candidates": ranking_metrics([r["ranking"] for r in rows], answers),
           "llm_over_top_k": ranking_metrics(llm_only, answers),
           "combined": ranking_metrics([combined(r, fitted[r["fold"]]) for r in rows], answers),
           "fold_weights": {str(f): w for f, w in fitted.items()},
           "weight_on_all": fit_weight(rows),
           "seconds_per_question": round(float(np.mean([r["seconds"] for r in rows])), 3),
           "rankings": {str(r["question_id"]): combined(r, fitted[r["fold"]])[:len(r["llm"])] for r in rows}}
    return out


def rerank(workspace: Path, run: str, cfg: RerankConfig, progress: bool = True, device=None) -> dict:
    """Score, evaluate and save (WS/runs/<run>/rerank@<model>+k<k>/summary.json, with each question's combined top
    k, which the full task's routed rows read)."""
    rows = score_run(workspace, run, cfg, progress, device)
    summary = {"run": run, "config": asdict(cfg), **evaluate(rows)}
    atomic_write(rerank_dir(workspace, run, cfg) / "summary.json", json.dumps(summary, indent=1))
    return summary


MEASURED_WEIGHT = 0.2  # the weight fit on all 254 questions of the 41 shared books (book-level CV, docs/who-ranker.md)


def served_weight(workspace: Path, base: str) -> tuple[float, str]:
    """(weight, where it comes from) for re-ranking in `ask`: the workspace's own re-ranking of a by-book run with
    this model (fit on all its questions), else of any run, else the weight measured on the shared books."""
    model = model_name(base)
    found = sorted(Workspace(workspace).runs.glob(f"*/rerank@{model}+k*/summary.json"),
                   key=lambda p: ("+by-book" not in p.parent.parent.name, p.parent.name))
    for path in found:
        s = json.loads(path.read_text())
        if s.get("config", {}).get("candidates", "network") == "network":
            return float(s["weight_on_all"]), f"fit on run {s['run']}'s {s['questions']} questions"
    return MEASURED_WEIGHT, "the weight measured on the 41 shared books (book-level cross-validation)"


class Reranker:
    """`ask --rerank`: the LLM scores the memory network's top characters after the question's BM25F passages."""

    def __init__(self, workspace: Path, base: str = RerankConfig.base, device=None):
        self.ws = Workspace(workspace)
        self.base = base
        self.weight, self.why = served_weight(self.ws, base)
        self.reader = LLMReader(base, device, RerankConfig.prompt_tokens, runtime="transformers")
        try:
            who = json.loads((self.ws.who / "who_questions.json").read_text())
            self.pool = [(q["question"], q["answer1"], q["document_id"]) for q in who]
        except (FileNotFoundError, ValueError, KeyError):
            self.pool = []

    def rerank(self, book_id: str, question: str, names: list[str], probs: list[float]) -> list[dict]:
        """The network's top names (best first, with its probabilities) in the combined order, each with its network
        and LLM probability (the LLM's over these names)."""
        from whoqa.reader.data import bm25f_passages
        from whoqa.retrieval.bm25f import RetrievalConfig, open_book
        passages, starts = bm25f_passages(*open_book(self.ws, book_id, RetrievalConfig()), question,
                                          RerankConfig.passages, starts=True)
        shots = few_shots(self.pool, book_id, RerankConfig.shots, SEED)
        llm = np.array(self.reader.name_scores(question, passages, names, shots, starts, LLMConfig.order))  # (k,)
        p_llm = np.exp(_log_softmax(llm))  # (k,)
        row = {"ranking": list(range(len(names))), "probs": probs, "llm": list(llm)}
        return [{"name": names[i], "network": probs[i], "llm": float(p_llm[i])} for i in combined(row, self.weight)]
