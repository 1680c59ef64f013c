"""`whoqa eval`: every system that exists, on the Who set, as a table like Angelidis et al.'s Table 2, with results
JSON (config and data fingerprint included) under WS/results/."""
from __future__ import annotations

import hashlib
import json
import logging
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from whoqa.baselines import book_frequency, random_ranking
from whoqa.book import atomic_write
from whoqa.metrics import ranking_metrics, text_metrics

log = logging.getLogger(__name__)
RANKING_KEYS = ("p@1", "p@5", "mrr")


@dataclass
class EvalConfig:
    workspace: str
    data: str | None = None  # another NarrativeQA-layout folder to evaluate on (prepared under WS/eval-data/)
    seed: int = 13
    random_trials: int = 5
    jobs: int = 1


class MissingStage(Exception):
    """An earlier stage's artifacts are missing; the message says which command to run."""


def load_who_set(workspace: Path) -> tuple[dict[str, list[dict]], list[dict]]:
    who = Path(workspace) / "who"
    paths = [who / "characters.json", who / "who_questions.json"]
    for p in paths:
        if not p.is_file():
            raise MissingStage(f"{p} is missing: run `whoqa prepare --workspace {workspace}` first")
    return json.loads(paths[0].read_text()), json.loads(paths[1].read_text())


def fingerprint(workspace: Path) -> str:
    h = hashlib.sha256()
    for name in ("characters.json", "who_questions.json"):
        h.update((Path(workspace) / "who" / name).read_bytes())
    return h.hexdigest()[:16]


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
    ws = Path(cfg.workspace)
    target = ws
    if cfg.data:
        target = prepare_other(cfg)
    characters, questions = load_who_set(target)
    systems = baseline_systems(cfg.seed)
    results = {}
    for name, (ranker, trials) in systems.items():
        results[name] = evaluate_system(name, ranker, trials or cfg.random_trials, characters, questions)
    meta = {"config": asdict(cfg), "data_fingerprint": fingerprint(target), "who_set": str(target / "who"),
            "questions": len(questions), "books": len({q["document_id"] for q in questions})}
    suffix = f"@{Path(cfg.data).name}" if cfg.data else ""
    for name, res in results.items():
        atomic_write(ws / "results" / f"{name}{suffix}.json", json.dumps({**meta, **res}, indent=1))
    table = format_table(results, meta)
    atomic_write(ws / "results" / f"table{suffix}.txt", table + "\n")
    return {"meta": meta, "results": results, "table": table}


def prepare_other(cfg: EvalConfig) -> Path:
    """Prepare another folder's books and Who set in their own workspace, so a model is judged on unseen books."""
    from data_prep.prepare import PrepareConfig, prepare
    target = Path(cfg.workspace) / "eval-data" / Path(cfg.data).resolve().name
    rep = prepare(PrepareConfig(cfg.data, str(target), jobs=cfg.jobs, unlabeled=False, artificial=False,
                                embeddings=False))
    if rep.failed:
        log.warning("%d book(s) of %s failed to prepare and are left out", len(rep.failed), cfg.data)
    return target


def format_table(results: dict[str, dict], meta: dict) -> str:
    lines = [f"Who set: {meta['questions']} questions, {meta['books']} books (data {meta['data_fingerprint']})",
             f"{'system':<22}{'P@1':>16}{'P@5':>16}{'MRR':>18}{'ROUGE-L':>10}{'BLEU-1':>8}{'EM':>7}{'F1':>7}"]
    for name, r in results.items():
        def cell(k, fmt):
            v = fmt.format(r[k])
            return v + (" ± " + fmt.format(r[k + "_std"]) if r["trials"] > 1 else "")
        t = r["text"]
        lines.append(f"{name:<22}{cell('p@1', '{:.2f}'):>16}{cell('p@5', '{:.2f}'):>16}{cell('mrr', '{:.3f}'):>18}"
                     f"{t.get('rouge_l', 0):>10.2f}{t.get('bleu_1', 0):>8.2f}{t.get('em', 0):>7.2f}{t.get('f1', 0):>7.2f}")
    return "\n".join(lines)
