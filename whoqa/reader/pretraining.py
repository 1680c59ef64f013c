"""What the reader's two pretraining stages (prereading, answer lookup) share: where their models live, which books
they read, and one resumable loop (seeded order, AdamW, bf16, checkpoints keyed by the config)."""
from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from whoqa.core.artifacts import read_cache
from whoqa.core.progress import bar as progress_bar
from whoqa.core.files import atomic_write
from whoqa.core.distributed import barrier, data_parallel, global_mean_loss, world
from whoqa.reader.model import FiDReader, read_reader_record
from whoqa.reader.steps import Precision, optimizer, trainable
from whoqa.core.workspace import Workspace
from whoqa.core.store import load_questions


def preread_dir(workspace: Path) -> Path:
    return Workspace(workspace).models / "preread"


def lookup_dir(workspace: Path, copy: bool = False) -> Path:
    """The answer-lookup model, with or without a copy pointer (both can exist: each QA run names the one it uses)."""
    return Workspace(workspace).models / ("lookup+copy" if copy else "lookup")


def preread_record(workspace: Path) -> dict | None:
    """The config of the prereading under WS/models/preread/ (None when there is none)."""
    return (read_reader_record(preread_dir(workspace)) or {}).get("config")


def preread_books(workspace: Path, which: str) -> list[str]:
    ws = Workspace(workspace)
    every = sorted(p.name for p in (ws.books).iterdir() if p.is_dir() and any(p.glob("*.book"))) \
        if (ws.books).is_dir() else []
    if which == "all":
        return every
    if which != "unlabeled":
        raise ValueError(f"unknown prereading books {which!r}: use unlabeled or all")
    asked = set(load_questions(ws)) if (ws.questions).is_file() else set()
    return [b for b in every if b not in asked]


def checkpoint_dir(out_dir: Path) -> Path:
    return out_dir.with_name(out_dir.name + ".checkpoint")


def finish_pretraining(reader: FiDReader, out_dir: Path, meta: dict) -> None:
    """Save a finished pretraining (meta -> whoqa_reader.json) and drop its checkpoint (the first process of
    several)."""
    w = world()
    if w.main:
        reader.save(out_dir, meta)
        shutil.rmtree(checkpoint_dir(out_dir), ignore_errors=True)
    barrier(w)


def saved_step(out_dir: Path, config: dict) -> tuple[Path, dict] | tuple[None, None]:
    """The last complete checkpoint of a run of this config: (its folder, its state), else (None, None).
    A checkpoint is a folder step-NNNNNN/ (model, optimizer, scheduler) that state.json names only once it is whole,
    so a process killed while saving leaves the previous checkpoint in force, never a model of one step with the
    optimizer or step count of another."""
    ckpt = checkpoint_dir(out_dir)
    state = read_cache(ckpt / "state.json", dict)  # missing or damaged: pretraining starts afresh
    if not state or state.get("config") != config or not isinstance(state.get("folder"), str):
        return None, None
    folder = ckpt / state["folder"]
    if not all((folder / f).exists() for f in ("model", "optimizer.pt", "scheduler.pt")):
        return None, None
    return folder, state


def save_step(out_dir: Path, reader: FiDReader, opt, sched, record: dict, step: int, losses: list[float]) -> None:
    """Checkpoint after `step` steps: write a new folder, name it in state.json (atomically), then drop the others."""
    ckpt = checkpoint_dir(out_dir)
    name = f"step-{step:06d}"
    folder = ckpt / name
    shutil.rmtree(folder, ignore_errors=True)  # a half-written one from a killed save
    reader.save(folder / "model")
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    torch.save(sched.state_dict(), folder / "scheduler.pt")
    atomic_write(ckpt / "state.json", json.dumps({"config": record, "step": step, "folder": name, "losses": losses}))
    for old in ckpt.iterdir():
        if old.is_dir() and old.name != name:
            shutil.rmtree(old, ignore_errors=True)
        elif old.name in ("optimizer.pt", "scheduler.pt"):  # the flat layout before checkpoints were folders
            old.unlink()


def resume(out_dir: Path, config: dict, base: str | None, device=None) -> tuple[FiDReader, dict | None]:
    """The reader to pretrain, on device: the checkpoint of an interrupted run of the same config, else a fresh one
    from base."""
    folder, state = saved_step(out_dir, config)
    return FiDReader.load(str(folder / "model") if folder else base, device), state


def pretrain_loop(reader: FiDReader, state: dict | None, out_dir: Path, cfg, record: dict, n: int, loss_of, desc: str,
                  progress: bool) -> tuple[dict, list[float]]:
    """The pretraining stages' shared loop: n examples once each in a seeded order, AdamW with linear decay, mixed
    precision (cfg.bf16) on the reader's device, a checkpoint every cfg.checkpoint_every steps keyed by record
    (resumed by `resume` with the same record). cfg: batch_size, lr, bf16, train_encoder, seed, checkpoint_every; loss_of(indices) -> mean loss,
    loss_of(indices, "sum") -> (summed loss, target count) for data-parallel steps under torchrun."""
    params = trainable(reader, cfg.train_encoder)
    steps = math.ceil(n / cfg.batch_size)
    opt, sched = optimizer(params, cfg.lr, steps)
    first = 0
    if state:
        folder = checkpoint_dir(out_dir) / state["folder"]
        opt.load_state_dict(torch.load(folder / "optimizer.pt", map_location=reader.device))
        sched.load_state_dict(torch.load(folder / "scheduler.pt"))
        first = state["step"]
    losses = list(state["losses"]) if state else []
    order = np.random.default_rng(cfg.seed + 1).permutation(n)
    bar = progress_bar(total=steps, desc=desc, unit="step", progress=progress)
    bar.update(first)
    t0 = time.perf_counter()
    reader.model.train()
    trainable(reader, cfg.train_encoder)
    precision = Precision(reader.device, cfg.bf16)
    w = world()
    ddp = data_parallel(reader, w)
    for step in range(first, steps):
        idx = order[step * cfg.batch_size:(step + 1) * cfg.batch_size].tolist()
        with precision.autocast():
            loss, logged = global_mean_loss(ddp, w, idx, loss_of)
        losses.append(round(precision.step(loss, params, opt, sched, f"{desc} step {step}", logged), 4))
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
        if (step + 1) % cfg.checkpoint_every == 0 and step + 1 < steps and w.main:
            save_step(out_dir, reader, opt, sched, record, step + 1, losses)
    bar.close()
    secs = time.perf_counter() - t0
    done = (steps - first) * cfg.batch_size
    return {"steps": steps, "seconds": round(secs, 1), "precision": precision.name,
            "examples_per_second": round(done / secs, 2) if secs else None,
            "loss_first": float(np.mean(losses[:20])) if losses else None,
            "loss_last": float(np.mean(losses[-20:])) if losses else None}, losses

