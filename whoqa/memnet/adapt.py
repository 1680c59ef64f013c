"""Test-time adaptation: a trained memory network meets a book it never saw.

Its characters' vectors (and the book's new words) were only folded into word2vec; the books it was pretrained on had
theirs tuned on their artificial Who questions. Adaptation does the same for the new book, label-free: it tunes only
the embedding rows the model was not trained with (`model.trained_rows` and after) on the book's own artificial
questions, with every other parameter frozen, and returns those rows; `patched` applies them while the book is asked.
"""
from __future__ import annotations

import hashlib
import json
import logging
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from whoqa.core.artifacts import DamagedArtifact, forget_checksum, load_binary, record_checksum
from whoqa.core.seed import set_seed
from whoqa.core.workspace import Workspace
from whoqa.memnet.config import AdaptConfig
from whoqa.memnet.data import BookArrays, artificial_examples
from whoqa.memnet.train import fit

log = logging.getLogger(__name__)


class RowPatch(nn.Module):
    """An embedding whose rows `rows` are trainable (`delta` added), the rest frozen; cost grows with the ids looked up,
    not with the vocabulary."""

    def __init__(self, weight: torch.Tensor, rows: torch.Tensor):
        super().__init__()
        self.register_buffer("weight", weight)  # (V, d) frozen
        rows = rows.to(weight.device)
        slot = torch.full((weight.shape[0],), -1, dtype=torch.long, device=weight.device)  # (V,) row -> delta index
        slot[rows] = torch.arange(len(rows), device=weight.device)
        self.register_buffer("slot", slot)
        self.delta = nn.Parameter(torch.zeros(len(rows), weight.shape[1], device=weight.device))  # (n, d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.weight[ids]  # (..., d)
        s = self.slot[ids]  # (...)
        return torch.where((s >= 0).unsqueeze(-1), out + self.delta[s.clamp(min=0)], out)


def book_rows(model, arrays: BookArrays) -> torch.Tensor:
    """Embedding rows of the book the model was not trained with (its characters, new words). (n,) long"""
    ids = np.unique(np.concatenate([arrays.sentences.ravel(), arrays.values.ravel(), arrays.candidates.ravel()]))
    return torch.from_numpy(ids[ids >= getattr(model, "trained_rows", 1 << 62)].astype(np.int64))


def adapt(model, workspace: Path, book_id: str, vocab, books: dict[str, BookArrays],
          cfg: AdaptConfig | None = None) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(rows (n,), their tuned vectors (n, d), stats) for one book; the model itself is left as it was."""
    cfg = cfg or AdaptConfig()
    rows = book_rows(model, books[book_id])
    examples = artificial_examples(workspace, [book_id], vocab, books, seed=cfg.seed)
    if len(examples) > cfg.max_questions:
        keep = np.random.default_rng(cfg.seed).choice(len(examples), cfg.max_questions, replace=False)
        examples = [examples[i] for i in sorted(keep)]
    stats = {"rows": len(rows), "questions": len(examples), "config": asdict(cfg)}
    if not len(rows) or not examples:
        if not examples:
            log.warning("book %s has no artificial questions to adapt on: its folded-in vectors are used", book_id)
        return rows, model.embed.weight.data[rows.to(model.embed.weight.device)].cpu(), stats
    set_seed(cfg.seed)
    embed, grads = model.embed, {n: p.requires_grad for n, p in model.named_parameters()}
    for p in model.parameters():
        p.requires_grad_(False)
    model.embed = RowPatch(embed.weight.data, rows)
    try:
        with torch.enable_grad():  # callers may be answering under no_grad
            losses = fit(model, examples, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, cfg.seed)
        tuned = (embed.weight.data[rows.to(embed.weight.device)] + model.embed.delta.data).cpu()  # (n, d), kept on host
    finally:
        model.embed = embed
        for n, p in model.named_parameters():
            p.requires_grad_(grads[n])
        model.eval()
    stats["losses"] = losses
    return rows, tuned, stats


@contextmanager
def patched(model, rows: torch.Tensor, vectors: torch.Tensor):
    """The model with rows set to vectors, restored on exit."""
    w = model.embed.weight.data
    rows, vectors = rows.to(w.device), vectors.to(w.device)
    old = w[rows].clone()
    w[rows] = vectors
    try:
        yield model
    finally:
        w[rows] = old


def cached_adapt(model, model_dir: Path, workspace: Path, book_id: str, vocab, books: dict[str, BookArrays],
                 cfg: AdaptConfig | None = None):
    """adapt(), kept under WS/adapted/<model>/<book>.pt and reused while model, vectors and config are the same."""
    cfg = cfg or AdaptConfig()
    key = hashlib.sha256(json.dumps([asdict(cfg), vocab.record(), (Path(model_dir) / "model.pt").stat().st_mtime_ns,
                                     str(Path(workspace).resolve())]).encode()).hexdigest()[:16]
    ws = Workspace(workspace)
    try:  # WS/adapted/<model folder under WS/models, members included>/<book>.pt
        where = Path(model_dir).resolve().relative_to(ws.models.resolve())
    except ValueError:  # a model of another workspace (eval --data adapts into the books' own workspace)
        where = Path(f"{Path(model_dir).name}-{hashlib.sha256(str(Path(model_dir).resolve()).encode()).hexdigest()[:8]}")
    path = ws.adapted / where / f"{book_id}.pt"
    if path.is_file():
        try:
            saved = load_binary(path, lambda p: torch.load(p, map_location="cpu"), "adapted again")
            if saved.get("key") == key:
                return saved["rows"], saved["vectors"], saved["stats"]
        except DamagedArtifact as e:  # a cache: adapted again
            log.warning("%s: adapted again", e)
    rows, vectors, stats = adapt(model, workspace, book_id, vocab, books, cfg)
    if ws.read_only:  # (served read-only: adapted again by the next process)
        return rows, vectors, stats
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"key": key, "rows": rows, "vectors": vectors, "stats": stats}, path.with_suffix(".tmp"))
    forget_checksum(path)
    path.with_suffix(".tmp").replace(path)
    record_checksum(path)
    return rows, vectors, stats
