"""Who answers re-ranked by a local LLM that reads the question's passages: a second, book-independent opinion.

The memory network's cross-validated run gives each question its calibrated ensemble probabilities (its fold's
trials, the temperature fit on the other folds, `whoqa.memnet.ensemble`). Its top k characters are then scored by the
LLM: the log-likelihood of each character's name as the answer after the passages and the question
(`LLMReader.name_scores`), normalised over the k names. The two are combined as

    score(c) = log p_memnet(c) + w * log p_llm(c)        for c in the top k (the rest keep the network's order)

with the one weight w fit, for the questions of fold f, on the other folds' questions only (the mean reciprocal rank
of the right character among the k; the smallest of equal weights). A by-book run makes this the new-book measure:
neither the network nor w ever saw the judged book. The LLM's scores are kept per question and name
(WS/runs/<run>/rerank@<model>+k<k>.../scores.jsonl) and resumable.

`--candidates features` judges the feature ranker on the same folds instead (its training: whoqa.ranker.train): its
first stage picks the k names, the LLM's scores are its second stage's fourth feature; the fit it saves is what
`whoqa.service` serves (`whoqa.ranker.fits.served_fit`). The LLM's name scores are whoqa.ranker.scores.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from whoqa.core.store import load_who_set
from whoqa.core.calibration import probabilities
from whoqa.core.executor import ExecutorConfig
from whoqa.core.metrics import book_bootstrap, ranking_metrics
from whoqa.core.seed import SEED
from whoqa.core.workspace import Workspace
from whoqa.memnet.ensemble import cross_fitted, items, read_fold_files
from whoqa.ranker.config import CANDIDATES, RerankConfig
from whoqa.ranker.features import book_frequency
from whoqa.ranker.fits import read_summary, save_fit
from whoqa.ranker.model import check_llm_features, log_softmax
from whoqa.ranker.scores import NameScores, llm_key, rerank_dir  # noqa: F401  (their names, as tests import them)
from whoqa.ranker.train import (book_fold_candidates, feature_run, features_run, measured_variant,  # noqa: F401
                                question_features, stage1_features)
from whoqa.llm.prompt import check_shot_policy
from whoqa.llm.render import check_rendering

# the LLM's weights tried (one number per fold: a grid is enough); 100 is the LLM's order alone, ties to the network's
WEIGHTS = np.array([0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0])


def frequency_candidates(workspace: Path, cands: list[dict]) -> list[dict]:
    """The same questions (and folds) with book frequency's ranking instead: the book's characters by mentions, the
    probabilities their shares of the mentions."""
    chars, questions = load_who_set(workspace)
    who = {q["question_id"]: q["document_id"] for q in questions}
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
    runs = read_fold_files(run_dir)
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



def score_run(workspace: Path, run: str, cfg: RerankConfig, progress: bool = True, device=None,
              executor: ExecutorConfig = ExecutorConfig()) -> list[dict]:
    """The network's or book frequency's candidates of each question of the run, with the LLM's log-likelihood of
    their top-k names (`llm`, in the candidates' order)."""
    ws = Workspace(workspace)
    cands = network_candidates(ws.runs / run)[:cfg.max_eval_samples]
    if cfg.candidates == "book-frequency":
        cands = frequency_candidates(ws, cands)
    folder = rerank_dir(ws, run, cfg)
    folder.mkdir(parents=True, exist_ok=True)
    scores = NameScores(ws, folder, cfg, progress, device, executor)
    scores.ensure({c["question_id"]: c["ranking"][:cfg.top_k] for c in cands})
    return [{**c, "llm": scores.of(c["question_id"], c["ranking"][:cfg.top_k]),
             "seconds": scores.seconds.get(c["question_id"], 0.0)} for c in cands]


def combined(row: dict, w: float) -> list[int]:
    """The question's ranking with its top k reordered by log p_memnet + w * log p_llm."""
    k = len(row["llm"])
    mem = np.log(np.maximum(np.array(row["probs"][:k]), 1e-12))  # (k,)
    s = mem + w * log_softmax(np.array(row["llm"]))  # (k,)
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


@dataclass
class RerankReport:
    """What `whoqa rerank` measured: `record` is the re-ranking's summary.json (and its fit, for the feature ranker)."""
    record: dict

    def summary(self) -> list[str]:
        s = self.record
        lines = [f"{label:22s} P@1 {s[row]['p@1']:6.2f}  P@5 {s[row]['p@5']:6.2f}  MRR {s[row]['mrr']:.3f}"
                 for row, label in (("candidates", s["config"]["candidates"]),
                                    ("llm_over_top_k", f"LLM over its top {s['top_k']}"), ("combined", "combined"))]
        if "fold_weights" in s:
            lines.append(f"LLM weight per fold: {sorted(set(s['fold_weights'].values()))}")
        else:
            f = s["book_frequency"]
            lines += [f"book frequency         P@1 {f['p@1']:6.2f}  P@5 {f['p@5']:6.2f}  MRR {f['mrr']:.3f}",
                      f"ECE {s['ece']:.3f} (a calibrated ranker: {s['ece_if_calibrated']['mean']:.3f} on average, "
                      f"{s['ece_if_calibrated']['p95']:.3f} at the 95th percentile); LLM as "
                      f"{sorted(set(s['llm_features_chosen'].values()))} in the folds; weights fit on all "
                      f"({s['ranker']['llm_features']}): stage 1 {[round(w, 3) for w in s['ranker']['stage1']]}, "
                      f"stage 2 {[round(w, 3) for w in s['ranker']['stage2']]}"]
        return lines + [f"{s['seconds_per_question']} s/question (LLM); {s['questions']} questions"]


def rerank(workspace: Path, run: str | None, cfg: RerankConfig, progress: bool = True, device=None,
           executor: ExecutorConfig = ExecutorConfig()) -> RerankReport:
    """Score, evaluate and save (WS/runs/<run>/rerank@<model>+k<k>/summary.json, with each question's combined top
    k, which the full task's routed rows read). The feature ranker needs no run: without one it draws book folds of
    its own (WS/runs/features+by-book/)."""
    if cfg.candidates not in CANDIDATES:
        raise ValueError(f"unknown candidates {cfg.candidates!r}: use one of {', '.join(CANDIDATES)}")
    check_llm_features(cfg.llm_features, "--llm-features", select=True)  # said before minutes of LLM scoring
    check_rendering(cfg.rendering)
    check_shot_policy(cfg.shot_policy)
    stage1_features(cfg.stage1)
    executor.check()
    if cfg.fold_seed != SEED and (cfg.candidates != "features" or run):
        raise ValueError("--fold-seed draws the feature ranker's own book folds: use it with --candidates features "
                         "and no run (a run's folds are its own)")
    if cfg.candidates == "features":
        ws = Workspace(workspace)
        cands = network_candidates(ws.runs / run) if run else book_fold_candidates(ws, cfg.folds, cfg.fold_seed)
        summary = {"run": run or features_run(cfg.folds), "by_book_folds": None if run else cfg.folds,
                   "config": asdict(cfg), **feature_run(ws, run or features_run(cfg.folds), cands, cfg, progress,
                                                        device, executor)}
        run = summary["run"]
    elif not run:
        raise ValueError(f"--candidates {cfg.candidates} re-ranks a cross-validated run: name one (WS/runs/<run>)")
    else:
        summary = {"run": run, "config": asdict(cfg), **evaluate(score_run(workspace, run, cfg, progress, device, executor))}
    # another fold seed (the spread over folds) or an ablation keeps its summary beside the served one, sharing the
    # LLM's scores
    save_fit(rerank_dir(workspace, run, cfg), summary, measured_variant(cfg) or None)
    return RerankReport(summary)


def compare(workspace: Path, a: Path, b: Path) -> dict:
    """Two re-rankings of the same questions (their summary.json or folder, e.g. raw against resolved passages) as
    paired differences: a - b in P@1 / P@5 / MRR with a 95% interval from resampling whole books, on the questions
    both judged; and each one's figures and ECE."""
    sums = []
    for p in (Path(a), Path(b)):
        s = read_summary(p.parent, p.name) if p.suffix == ".json" else read_summary(p)
        if not s or "rankings" not in s:
            raise FileNotFoundError(f"{p}: no re-ranking summary with rankings: run `whoqa rerank` first")
        sums.append(s)
    who = {q["question_id"]: q for q in load_who_set(workspace)[1]}
    common = sorted(set(sums[0]["rankings"]) & set(sums[1]["rankings"]), key=int)
    common = [q for q in common if int(q) in who]
    if not common:
        raise ValueError(f"{a} and {b} judged no question in common")
    answers = [who[int(q)]["answers"] for q in common]
    books = [who[int(q)]["document_id"] for q in common]
    ranks = [[s["rankings"][q] for q in common] for s in sums]
    return {"questions": len(common), "a": str(a), "b": str(b),
            "figures": [{**ranking_metrics(r, answers), "ece": s.get("ece")} for r, s in zip(ranks, sums)],
            "paired": book_bootstrap(ranks[0], ranks[1], answers, books)}
