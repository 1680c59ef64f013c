"""`whoqa reader preread`: book prereading (Mou et al. 2021): the reader restores masked spans of passages
from books no question is asked about -> WS/models/preread/ (resumable from checkpoints)."""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from whoqa.core.files import atomic_write
from whoqa.core.runs import digest
from whoqa.core.seed import set_seed
from whoqa.reader.config import PrereadConfig
from whoqa.reader.data import pad_labels, sample_passages
from whoqa.reader.reports import PrereadReport
from whoqa.reader.model import READER_FILE, FiDReader, Fused, read_reader_record
from whoqa.reader.noise import mask_spans
from whoqa.reader.pretraining import finish_pretraining, preread_books, preread_dir, pretrain_loop, resume
from whoqa.reader.steps import decoder_start_id, input_reliance
from whoqa.core.workspace import Workspace


def preread_examples(reader: FiDReader, texts: list[str], cfg: PrereadConfig) -> list[tuple[list[int], list[int]]]:
    """(corrupted encoder input ids, decoder target ids) per passage, on cfg.seed."""
    tok = reader.tokenizer
    mask_id = tok.convert_tokens_to_ids(reader.mask_token)
    rng = np.random.default_rng(cfg.seed)
    start = decoder_start_id(reader)
    out = []
    for t in texts:
        enc = tok(t, truncation=True, max_length=cfg.passage_tokens, return_special_tokens_mask=True)
        ids, special = enc["input_ids"], enc["special_tokens_mask"]
        a = next((i for i, s in enumerate(special) if not s), len(ids))  # leading special tokens ([CLS], <s>)
        b = len(ids) - next((i for i, s in enumerate(reversed(special)) if not s), 0)  # trailing ones ([SEP], </s>)
        noisy, _ = mask_spans(ids[a:b], mask_id, rng, cfg.mask_ratio, cfg.span_lambda)
        target = ids[1:] if start is not None and ids and ids[0] == start else ids
        out.append((ids[:a] + noisy + ids[b:], target))
    return out


def _encode_single(reader: FiDReader, srcs: list[list[int]]) -> Fused:
    """One passage per example (token id lists) -> encoder states (B, T, H), mask (B, T)."""
    pad = reader.tokenizer.pad_token_id
    ids = torch.full((len(srcs), max(len(s) for s in srcs)), pad, dtype=torch.long)  # (B, T)
    for i, s in enumerate(srcs):
        ids[i, :len(s)] = torch.tensor(s)
    return reader.encode(ids, (ids != pad).long(), [1] * len(srcs))


def preread_reliance(workspace: Path, reader: FiDReader, cfg: PrereadConfig, books: list[str], progress: bool,
                     n: int = 64) -> dict:
    """Restoration loss on passages drawn with another seed, from their own corrupted passage and from another's."""
    texts = sample_passages(workspace, books, n, cfg.passage_words, cfg.seed + 7, progress)
    pairs = preread_examples(reader, texts, replace(cfg, seed=cfg.seed + 7))
    return input_reliance(reader, lambda idx: _encode_single(reader, [pairs[i][0] for i in idx]),
                          lambda idx: pad_labels([pairs[i][1] for i in idx]), len(pairs))


def preread(workspace: Path, cfg: PrereadConfig, progress: bool = True, device=None) -> PrereadReport:
    """Train the reader to restore masked book passages -> WS/models/preread/ (checkpoints: resumable), on device."""
    ws = Workspace(workspace)
    out_dir = preread_dir(ws)
    inputs = {"books": digest(preread_books(ws, cfg.books))}  # books added since: redone (older records: trusted)
    if (out_dir / "config.json").is_file() and (out_dir / READER_FILE).is_file():
        done = read_reader_record(out_dir)
        if done.get("config") == asdict(cfg) and done.get("inputs", inputs) == inputs:
            if "heldout" not in done["stats"]:  # made before this measurement existed: add it
                done["stats"]["heldout"] = preread_reliance(ws, FiDReader.load(str(out_dir), device), cfg,
                                                            preread_books(ws, cfg.books), progress)
                atomic_write(out_dir / READER_FILE, json.dumps(done, indent=1))
            return PrereadReport(done["stats"], skipped=True)
    set_seed(cfg.seed)
    books = preread_books(ws, cfg.books)
    if not books:
        raise FileNotFoundError(f"no {cfg.books} prepared books under {ws}/books to preread: run `whoqa prepare` "
                                "(with books-unlabeled/) first, or use --books all")
    texts = sample_passages(ws, books, cfg.passages, cfg.passage_words, cfg.seed, progress)
    reader, state = resume(out_dir, asdict(cfg), cfg.base, device)
    pairs = preread_examples(reader, texts, cfg)

    def loss_of(idx, reduction="mean"):
        with torch.set_grad_enabled(cfg.train_encoder):
            fused = _encode_single(reader, [pairs[i][0] for i in idx])  # states (B, T, H)
        labels = pad_labels([pairs[i][1] for i in idx])  # (B, A)
        loss = reader.loss(fused, labels, reduction)
        return (loss, int((labels != -100).sum())) if reduction == "sum" else loss

    stats, losses = pretrain_loop(reader, state, out_dir, cfg, asdict(cfg), len(pairs), loss_of, "preread", progress)
    stats = {"books": len(books), "passages": len(pairs), **stats,
             "passages_per_second": stats.pop("examples_per_second")}
    stats["heldout"] = preread_reliance(ws, reader, cfg, books, progress)
    finish_pretraining(reader, out_dir, {"config": asdict(cfg), "inputs": inputs, "stats": stats, "losses": losses})
    return PrereadReport(stats)

