"""`whoqa reader train`: QA training with book-level cross-validation (a book's questions are never trained on
before they are answered), generation, resumable folds, and the final reader for `whoqa ask`. A run starts from the
model its config names (a base, the prereading, or answer lookup) and records that pretraining's config (its lineage),
so a fold of an older pretraining is redone, never mixed in.
"""
from __future__ import annotations

import json
import logging
import math
import random
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from whoqa.core.registry import check_name
from whoqa.core.files import atomic_write
from whoqa.core.distributed import barrier, data_parallel, gather, global_mean_loss, shard, world
from whoqa.core.metrics import text_metrics
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import RUN_CONFIG, RUN_SUMMARY, digest, read_run_file
from whoqa.core.seed import set_seed
from whoqa.core.workspace import Workspace
from whoqa.reader.cache import StateCache, fused_inputs
from whoqa.reader.config import ReaderConfig, run_name, with_defaults
from whoqa.reader.data import CONTEXTS, Batcher, ReaderExample, book_folds, build_examples
from whoqa.reader.model import FiDReader, read_reader_record
from whoqa.reader.pretraining import lookup_dir, preread_dir, preread_record
from whoqa.reader.reports import ReaderFinalReport, ReaderRunReport
from whoqa.reader.steps import Precision, batcher_of, input_reliance, optimizer, trainable

log = logging.getLogger(__name__)


def fit(reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], cfg: ReaderConfig,
        cache: StateCache | None, desc: str = "train", progress: bool = True) -> dict:
    """QA training: each epoch, each question once with one of its answers (drawn on the seed) as the target. Under
    torchrun, each process takes its share of every batch (whoqa.core.distributed): the same steps as one process."""
    params = trainable(reader, cfg.train_encoder)
    reader.model.train()
    trainable(reader, cfg.train_encoder)
    w = world()
    ddp = data_parallel(reader, w)
    steps = cfg.epochs * math.ceil(len(examples) / cfg.batch_size)
    opt, sched = optimizer(params, cfg.lr, steps)
    rng = random.Random(cfg.seed)
    precision = Precision(reader.device, cfg.bf16)
    losses, norms = [], []
    bar = progress_bar(total=steps, desc=desc, unit="step", progress=progress)
    t0 = time.perf_counter()
    for epoch in range(cfg.epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for i in range(0, len(order), cfg.batch_size):
            chunk = [examples[j] for j in order[i:i + cfg.batch_size]]
            answers = [rng.choice([a for a in e.answers if a.strip()] or [""]) for e in chunk]

            def loss_of(idx, reduction="mean"):
                labels = batcher.labels([answers[j] for j in idx])  # (b, A)
                loss = reader.loss(fused_inputs(reader, batcher, cache, [chunk[j] for j in idx], cfg.train_encoder),
                                   labels, reduction)
                return (loss, int((labels != -100).sum())) if reduction == "sum" else loss
            with precision.autocast():
                loss, logged = global_mean_loss(ddp, w, list(range(len(chunk))), loss_of)
            losses.append(precision.step(loss, params, opt, sched, f"{desc} epoch {epoch}", logged))
            norms.append(precision.grad_norm)
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
    bar.close()
    secs = time.perf_counter() - t0
    n = len(examples) * cfg.epochs
    return {"examples": len(examples), "steps": steps, "seconds": round(secs, 1), "precision": precision.name,
            "examples_per_second": round(n / secs, 2) if secs else None,
            "loss_first": float(np.mean(losses[:20])), "loss_last": float(np.mean(losses[-20:])),
            "grad_norm_first": norms[0] if norms else None}


def predict(reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], cfg: ReaderConfig,
            cache: StateCache | None, progress: bool = True, batch: int = 8) -> list[str]:
    """Generated answers, in order; under torchrun each process answers its share of the questions."""
    reader.model.eval()
    w = world()
    every, examples = examples, shard(examples, w)
    out: list[str] = []
    bar = progress_bar(total=len(examples), desc="generate", unit="q", progress=progress and w.main)
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        with torch.no_grad():
            fused = fused_inputs(reader, batcher, cache, chunk, False)
        out += reader.generate(fused, cfg.max_new_tokens, cfg.num_beams, cfg.no_repeat_ngram)
        bar.update(len(chunk))
    bar.close()
    out = gather(out, w)
    assert len(out) == len(every)
    return out


def start_model_path(workspace: Path, cfg: ReaderConfig) -> str | None:
    if cfg.preread and cfg.lookup:
        raise ValueError("--lookup starts from the answer-lookup model, which starts from the prereading itself: "
                         "drop --preread")
    if not (cfg.preread or cfg.lookup):
        return cfg.base
    path, stage = (lookup_dir(workspace, cfg.copy), "lookup" + (" --copy" if cfg.copy else "")) if cfg.lookup \
        else (preread_dir(workspace), "preread")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is missing: run `whoqa reader {stage} --workspace {workspace}`")
    return str(path)


def load_start_model(workspace: Path, cfg: ReaderConfig, device=None) -> FiDReader:
    """The reader a QA run starts from (start_path) on device, with a fresh copy pointer when cfg.copy and it has
    none."""
    path = start_model_path(workspace, cfg)
    reader = FiDReader.load(path, device)
    if cfg.copy:
        reader.add_pointer()
    elif reader.pointer is not None:
        raise ValueError(f"the reader at {path} has a copy pointer: add --copy")
    return reader


def pretraining_lineage(workspace: Path, cfg: ReaderConfig) -> dict:
    """What a run starts from, saved with each fold ({"preread": its prereading config} and, for --lookup runs,
    {"lookup": the answer-lookup config}): a fold of an older pretraining is redone, never mixed in."""
    if cfg.lookup:
        done = read_reader_record(lookup_dir(workspace, cfg.copy)) or {}
        return {"preread": done.get("preread"), "lookup": done.get("config")}
    return {"preread": preread_record(workspace) if cfg.preread else None}


def cross_validate(workspace: Path, cfg: ReaderConfig, progress: bool = True, device=None) -> ReaderRunReport:
    """Book-level k-fold: fold k's books are answered by a reader trained on the other folds' books. Each finished
    fold is a file (WS/reader/runs/<name>/fold<k>.json), so an interrupted run resumes at the next fold. device:
    where the reader runs (a --device value; not part of the run's identity)."""
    check_name("reader context", cfg.context, CONTEXTS)
    ws = Workspace(workspace)
    name = run_name(cfg)
    run_dir = ws.reader_runs / name
    examples = build_examples(ws, cfg.context, cfg.top_k, progress)
    folds = book_folds(examples, cfg.folds, cfg.seed)
    start_model_path(ws, cfg)  # a missing pretraining fails before any work
    start = pretraining_lineage(ws, cfg)
    w = world()
    archived = None
    if w.main:  # (under torchrun every process runs this loop; the first one writes)
        archived = archive_other_run(ws, run_dir, cfg, start)
        atomic_write(run_dir / "config.json", json.dumps(asdict(cfg), indent=1))
    barrier(w)
    finished = {d["fold"] for d in current_folds(ws, run_dir)[1]}
    cache = None
    for k, test_books in enumerate(folds):
        path = run_dir / f"fold{k}.json"
        if k in finished:
            continue
        set_seed(cfg.seed + k)
        reader = load_start_model(ws, cfg, device)
        batcher = batcher_of(reader, cfg)
        held = set(test_books)
        train = [e for e in examples if e.document_id not in held][:cfg.max_train_samples]
        test = [e for e in examples if e.document_id in held][:cfg.max_eval_samples]
        if not cfg.train_encoder:
            cache = cache or StateCache(ws, reader, cfg)
            cache.ensure(reader, batcher, train + test, progress)
        stats = fit(reader, batcher, train, cfg, cache, f"{name} fold {k}", progress)
        stats["test_input_reliance"] = input_reliance(
            reader, lambda idx: fused_inputs(reader, batcher, cache, [test[i] for i in idx], False),
            lambda idx: batcher.labels([test[i].answers[0] for i in idx]), len(test))
        t0 = time.perf_counter()
        preds = predict(reader, batcher, test, cfg, cache, progress)
        stats["generate_seconds_per_question"] = round((time.perf_counter() - t0) / max(1, len(test)), 3)
        stats["processes"] = w.size
        barrier(w)
        if not w.main:
            continue
        reader.save(ws.reader_models / name / f"fold{k}", {"config": asdict(cfg), "fold": k,
                                                                     "test_books": test_books})
        rows = [{"question_id": e.question_id, "document_id": e.document_id, "prediction": p}
                for e, p in zip(test, preds)]
        atomic_write(path, json.dumps({"config": asdict(cfg), **start, "fold": k, "test_books": test_books,
                                       "stats": stats,
                                       "metrics": text_metrics(preds, [e.answers for e in test]),
                                       "predictions": rows}, indent=1))
    barrier(w)
    summary = summarize(run_dir, current_folds(ws, run_dir)[1], {e.question_id: e.answers for e in examples})
    return ReaderRunReport({**summary, "archived_earlier_run": archived})


def current_folds(workspace: Path, run_dir: Path) -> tuple[int, list[dict]]:
    """(folds the run has, its finished fold records made with its current config and pretraining start): a fold left
    over from an earlier config is not mixed into the results (fields added to ReaderConfig since count as their
    defaults)."""
    cfg = asdict(ReaderConfig(**read_run_file(run_dir, RUN_CONFIG)))
    start = pretraining_lineage(workspace, ReaderConfig(**cfg))
    return cfg["folds"], [d for d in read_folds(run_dir) if same_run(d, cfg, start)]


def read_folds(run_dir: Path) -> list[dict]:
    """A reader run's fold records (WS/reader/runs/<name>/fold<k>.json), in fold order."""
    return [read_run_file(run_dir, f.name) for f in sorted(Path(run_dir).glob("fold*.json"))]


def read_run(run_dir: Path) -> tuple[dict, dict | None, dict | None]:
    """A reader run's (config, its first fold's record, its summary); the last two None until written."""
    return (read_run_file(run_dir, RUN_CONFIG), read_run_file(run_dir, "fold0.json"),
            read_run_file(run_dir, RUN_SUMMARY))


def same_run(fold: dict, cfg: dict, start: dict) -> bool:
    """A fold record was made by the run (config, pretraining start) given."""
    return (asdict(ReaderConfig(**fold.get("config", {}))) == cfg
            and all(with_defaults(k, fold.get(k)) == with_defaults(k, v) for k, v in start.items()))


def archive_other_run(workspace: Path, run_dir: Path, cfg: ReaderConfig, start: dict) -> str | None:
    """Move a run folder holding folds of another config or start to WS/reader/runs-archive/ (kept, never mixed in
    nor overwritten); returns what was moved, or None."""
    folds = read_folds(run_dir)
    other = [d for d in folds if not same_run(d, asdict(cfg), start)]
    if not other:
        return None
    dest = Workspace(workspace).reader_runs_archive / f"{run_dir.name}@{digest(other[0].get('config'))}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(run_dir), str(dest))
    log.warning("%s: the earlier run was made with another config or start: kept in %s, redone", run_dir.name, dest)
    return str(dest)


def summarize(run_dir: Path, folds: list[dict], answers: dict[int, list[str]]) -> dict:
    """One run's fold records (current_folds) -> WS/reader/runs/<name>/summary.json."""
    rows = []
    stats = []
    for d in folds:
        rows += d["predictions"]
        stats.append(d["stats"])
    preds = [r["prediction"] for r in rows]
    out = {"run": run_dir.name, "questions": len(rows), "folds": len(stats),
           "metrics": text_metrics(preds, [answers[r["question_id"]] for r in rows]) if rows else {"n": 0},
           "train_examples_per_second": float(np.mean([s["examples_per_second"] for s in stats])) if stats else None,
           "generate_seconds_per_question": float(np.mean([s["generate_seconds_per_question"] for s in stats]))
           if stats else None}
    rel = [s["test_input_reliance"] for s in stats if "test_input_reliance" in s]
    if rel and len(rel) == len(stats):  # held-out answer loss from the question's own passages vs another question's
        n = sum(r["examples"] for r in rel)
        out["test_input_reliance"] = {k: round(sum(r[k] * r["examples"] for r in rel) / max(1, n), 4)
                                      for k in ("loss_own_input", "loss_other_input")}
    atomic_write(run_dir / "summary.json", json.dumps(out, indent=1))
    return out


def train_final(workspace: Path, cfg: ReaderConfig, progress: bool = True, device=None) -> ReaderFinalReport:
    """One reader on every question of every book -> WS/models/reader/<name>/final (for `whoqa ask`)."""
    ws = Workspace(workspace)
    examples = build_examples(ws, cfg.context, cfg.top_k, progress)[:cfg.max_train_samples]
    set_seed(cfg.seed)
    reader = load_start_model(ws, cfg, device)
    batcher = batcher_of(reader, cfg)
    cache = None
    if not cfg.train_encoder:
        cache = StateCache(ws, reader, cfg)
        cache.ensure(reader, batcher, examples, progress)
    stats = fit(reader, batcher, examples, cfg, cache, f"{run_name(cfg)} final", progress)
    if world().main:
        reader.save(ws.reader_models / run_name(cfg) / "final", {"config": asdict(cfg), "stats": stats})
    barrier(world())
    return ReaderFinalReport(run_name(cfg), stats)

