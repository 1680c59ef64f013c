"""`whoqa pretrain --reader preread` and `whoqa train --reader fid`: book prereading, then QA training with book-level
cross-validation, generation, checkpoints (save_pretrained) and resumable folds.

On a CPU the encoder is frozen by default (Mou et al. Table 3: prereading "helps decoders mostly"; training only the
decoder is comparable): each question's fused encoder states are then computed once, cached on disk, and shared by all
folds, epochs and the prereading variant. `--train-encoder` fine-tunes the whole model as the original FiD does.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import torch

from whoqa.book import atomic_write
from whoqa.reader.data import (CONTEXTS, Batcher, ReaderExample, book_folds, build_examples, pad_labels,
                               sample_passages)
from whoqa.reader.model import FiDReader, Fused, pad_states
from whoqa.reader.noise import mask_spans
from whoqa.train import set_seed

log = logging.getLogger(__name__)


def _bar(total, desc, unit, progress=True):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=unit, disable=not progress or os.environ.get("WHOQA_NO_PROGRESS") == "1")


@dataclass
class PrereadConfig:
    base: str | None = None  # Hugging Face seq2seq path, or a BERT-like encoder for bert2bert (default: bundled MiniLM)
    passages: int = 30000  # passages restored (steps = passages / batch_size; 3,000 taught no reading, see README)
    passage_words: int = 100  # words per sampled passage (cut to passage_tokens after tokenising)
    passage_tokens: int = 128
    mask_ratio: float = 0.15
    span_lambda: float = 3.0
    batch_size: int = 8
    lr: float = 1e-3  # the new cross-attention needs it: at 1e-4 the decoder learned a language model, not to copy
    train_encoder: bool = False
    bf16: bool = False  # bfloat16 autocast for training (~1.8x faster on CPUs with AVX512-BF16 or AMX)
    books: str = "unlabeled"  # unlabeled: books no question is asked about (never a held-out book); all: every book
    seed: int = 13
    checkpoint_every: int = 100  # steps


@dataclass
class ReaderConfig:
    context: str = "bm25f"  # none | bm25f | bert | oracle
    base: str | None = None  # as PrereadConfig.base; ignored with preread
    preread: bool = False  # start from WS/models/preread/
    lookup: bool = False  # start from WS/models/lookup/ (answer lookup on artificial questions, after prereading)
    copy: bool = False  # a copy pointer over the passages' tokens (with lookup: WS/models/lookup+copy/)
    question_passage: bool = False  # the question alone as one more passage, first (Batcher.question_passage)
    top_k: int = 10  # passages per question (Mou et al.: top 10)
    passage_tokens: int = 192  # "question [SEP] passage" tokens
    answer_tokens: int = 32
    folds: int = 2  # book-level folds (2 on a 2-core CPU: each fold trains on half the books)
    epochs: int = 3
    batch_size: int = 8
    lr: float = 3e-4  # AdamW, linear warm-up (5%) and decay; the decoder's cross-attention starts from scratch
    train_encoder: bool = False
    bf16: bool = False  # as PrereadConfig.bf16 (training only; answers are generated in float32)
    num_beams: int = 4
    max_new_tokens: int = 32
    no_repeat_ngram: int = 0  # > 0: answers never write an n-gram twice (a copy pointer can loop: "kragullullull")
    seed: int = 13
    max_train_samples: int | None = None  # debug: train on the first N questions of a fold
    max_eval_samples: int | None = None  # debug: answer the first N questions of a fold
    extra: dict = field(default_factory=dict)  # free-form notes saved with the results


def run_name(cfg: ReaderConfig) -> str:
    return (f"fid[{cfg.context}]" + ("+preread" if cfg.preread else "") + ("+lookup" if cfg.lookup else "")
            + ("+copy" if cfg.copy else "") + ("+question" if cfg.question_passage else "")
            + ("+encoder" if cfg.train_encoder else ""))


def preread_dir(workspace: Path) -> Path:
    return Path(workspace) / "models" / "preread"


def lookup_dir(workspace: Path, copy: bool = False) -> Path:
    """The answer-lookup model, with or without a copy pointer (both can exist: each QA run names the one it uses)."""
    return Path(workspace) / "models" / ("lookup+copy" if copy else "lookup")


def strip_start(reader: FiDReader) -> int | None:
    return reader.model.config.decoder_start_token_id if reader.model.config.model_type == "encoder-decoder" else None


def batcher_of(reader: FiDReader, cfg: "ReaderConfig") -> Batcher:
    return Batcher(reader.tokenizer, cfg.passage_tokens, cfg.answer_tokens, strip_start(reader), cfg.question_passage)


def trainable(reader: FiDReader, train_encoder: bool) -> list[torch.nn.Parameter]:
    enc = reader.encoder()
    enc.requires_grad_(train_encoder)
    if not train_encoder:
        enc.eval()  # frozen: no dropout, so cached states equal fresh ones
    return [p for p in reader.parameters() if p.requires_grad]  # the model's and the copy pointer's


def _optimizer(params, lr: float, steps: int):
    from transformers import get_linear_schedule_with_warmup
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, foreach=True)  # multi-tensor: ~1.4x faster on CPU
    return opt, get_linear_schedule_with_warmup(opt, max(1, steps // 20), max(1, steps))


def autocast(bf16: bool):
    """Mixed precision for training steps: matmuls in bfloat16, weights and optimizer state stay float32."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)


def _step(loss: torch.Tensor, params, opt, sched, what: str) -> float:
    if not torch.isfinite(loss):
        raise FloatingPointError(f"non-finite reader loss at {what}: lower --lr or check the inputs")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())


@torch.no_grad()
def input_reliance(reader: FiDReader, states_of, targets_of, n: int, batch: int = 16) -> dict:
    """Mean target loss given each example's own encoder input and given the next example's. The gap says how much
    the decoder reads its input: a reader that answers from style alone loses nothing when handed the wrong one."""
    reader.model.eval()
    own = other = 0.0
    for i in range(0, n, batch):
        idx = list(range(i, min(n, i + batch)))
        labels = targets_of(idx)  # (b, A)
        own += float(reader.loss(states_of(idx), labels)) * len(idx)  # states_of -> Fused, states (b, T, H)
        other += float(reader.loss(states_of([(j + 1) % n for j in idx]), labels)) * len(idx)
    return {"loss_own_input": round(own / max(1, n), 4), "loss_other_input": round(other / max(1, n), 4),
            "examples": n}


# ---- prereading ---------------------------------------------------------------------------------------------------
def preread_books(workspace: Path, which: str) -> list[str]:
    from whoqa.contexts import load_questions
    ws = Path(workspace)
    every = sorted(p.name for p in (ws / "books").iterdir() if p.is_dir() and any(p.glob("*.book"))) \
        if (ws / "books").is_dir() else []
    if which == "all":
        return every
    if which != "unlabeled":
        raise ValueError(f"unknown prereading books {which!r}: use unlabeled or all")
    asked = set(load_questions(ws)) if (ws / "questions.json").is_file() else set()
    return [b for b in every if b not in asked]


def preread_examples(reader: FiDReader, texts: list[str], cfg: PrereadConfig) -> list[tuple[list[int], list[int]]]:
    """(corrupted encoder input ids, decoder target ids) per passage, on cfg.seed."""
    tok = reader.tokenizer
    mask_id = tok.convert_tokens_to_ids(reader.mask_token)
    rng = np.random.default_rng(cfg.seed)
    start = strip_start(reader)
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


def preread(workspace: Path, cfg: PrereadConfig, progress: bool = True) -> dict:
    """Train the reader to restore masked book passages -> WS/models/preread/ (checkpoints: resumable)."""
    ws = Path(workspace)
    out_dir = preread_dir(ws)
    if (out_dir / "config.json").is_file() and (out_dir / "whoqa_reader.json").is_file():
        done = json.loads((out_dir / "whoqa_reader.json").read_text())
        if done.get("config") == asdict(cfg):
            if "heldout" not in done["stats"]:  # made before this measurement existed: add it
                done["stats"]["heldout"] = preread_reliance(ws, FiDReader.load(str(out_dir)), cfg,
                                                            preread_books(ws, cfg.books), progress)
                atomic_write(out_dir / "whoqa_reader.json", json.dumps(done, indent=1))
            return {**done["stats"], "skipped": True}
    set_seed(cfg.seed)
    books = preread_books(ws, cfg.books)
    if not books:
        raise FileNotFoundError(f"no {cfg.books} prepared books under {ws}/books to preread: run `whoqa prepare` "
                                "(with books-unlabeled/) first, or use --preread-books all")
    texts = sample_passages(ws, books, cfg.passages, cfg.passage_words, cfg.seed, progress)
    reader, state = resume(out_dir, asdict(cfg), cfg.base)
    pairs = preread_examples(reader, texts, cfg)

    def loss_of(idx):
        with torch.set_grad_enabled(cfg.train_encoder):
            fused = _encode_single(reader, [pairs[i][0] for i in idx])  # states (B, T, H)
        return reader.loss(fused, pad_labels([pairs[i][1] for i in idx]))

    stats, losses = pretrain_loop(reader, state, out_dir, cfg, asdict(cfg), len(pairs), loss_of, "preread", progress)
    stats = {"books": len(books), "passages": len(pairs), **stats,
             "passages_per_second": stats.pop("examples_per_second")}
    stats["heldout"] = preread_reliance(ws, reader, cfg, books, progress)
    finish_pretraining(reader, out_dir, {"config": asdict(cfg), "stats": stats, "losses": losses})
    return stats


def checkpoint_dir(out_dir: Path) -> Path:
    return out_dir.with_name(out_dir.name + ".checkpoint")


def finish_pretraining(reader: FiDReader, out_dir: Path, meta: dict) -> None:
    """Save a finished pretraining (meta -> whoqa_reader.json) and drop its checkpoint."""
    import shutil
    reader.save(out_dir, meta)
    shutil.rmtree(checkpoint_dir(out_dir), ignore_errors=True)


def resume(out_dir: Path, config: dict, base: str | None) -> tuple[FiDReader, dict | None]:
    """The reader to pretrain: the checkpoint of an interrupted run of the same config, else a fresh one from base."""
    ckpt = checkpoint_dir(out_dir)
    state = json.loads((ckpt / "state.json").read_text()) if (ckpt / "state.json").is_file() else None
    if state and state.get("config") != config:
        state = None
    return FiDReader.load(str(ckpt / "model") if state else base), state


def pretrain_loop(reader: FiDReader, state: dict | None, out_dir: Path, cfg, record: dict, n: int, loss_of, desc: str,
                  progress: bool) -> tuple[dict, list[float]]:
    """The pretraining stages' shared loop: n examples once each in a seeded order, AdamW with linear decay, bf16
    autocast, a checkpoint every cfg.checkpoint_every steps keyed by record (resumed by `resume` with the same
    record). cfg: batch_size, lr, bf16, train_encoder, seed, checkpoint_every; loss_of(indices) -> scalar loss."""
    ckpt = checkpoint_dir(out_dir)
    params = trainable(reader, cfg.train_encoder)
    steps = math.ceil(n / cfg.batch_size)
    opt, sched = _optimizer(params, cfg.lr, steps)
    first = 0
    if state:
        opt.load_state_dict(torch.load(ckpt / "optimizer.pt"))
        sched.load_state_dict(torch.load(ckpt / "scheduler.pt"))
        first = state["step"]
    losses = list(state["losses"]) if state else []
    order = np.random.default_rng(cfg.seed + 1).permutation(n)
    bar = _bar(steps, desc, "step", progress)
    bar.update(first)
    t0 = time.perf_counter()
    reader.model.train()
    trainable(reader, cfg.train_encoder)
    for step in range(first, steps):
        idx = order[step * cfg.batch_size:(step + 1) * cfg.batch_size].tolist()
        with autocast(cfg.bf16):
            loss = loss_of(idx)
        losses.append(round(_step(loss, params, opt, sched, f"{desc} step {step}"), 4))
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
        if (step + 1) % cfg.checkpoint_every == 0 and step + 1 < steps:
            reader.save(ckpt / "model")
            torch.save(opt.state_dict(), ckpt / "optimizer.pt")
            torch.save(sched.state_dict(), ckpt / "scheduler.pt")
            atomic_write(ckpt / "state.json", json.dumps({"config": record, "step": step + 1, "losses": losses}))
    bar.close()
    secs = time.perf_counter() - t0
    done = (steps - first) * cfg.batch_size
    return {"steps": steps, "seconds": round(secs, 1),
            "examples_per_second": round(done / secs, 2) if secs else None,
            "loss_first": float(np.mean(losses[:20])) if losses else None,
            "loss_last": float(np.mean(losses[-20:])) if losses else None}, losses


# ---- QA training ----------------------------------------------------------------------------------------------------
def encoder_fingerprint(reader: FiDReader) -> str:
    h = hashlib.sha256()
    params = list(reader.encoder().parameters())
    for p in (params[0], params[-1]):
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:12]


@torch.no_grad()
def encode_examples(reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], batch: int = 4,
                    progress: bool = True) -> list[torch.Tensor]:
    """Fused encoder states of each example, (T_i, H) in float16: what the decoder reads when the encoder is frozen."""
    reader.encoder().eval()
    out: list[torch.Tensor] = []
    bar = _bar(len(examples), "encode passages", "q", progress)
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        ids, mask, counts = batcher.inputs(chunk)
        fused = reader.encode(ids, mask, counts)  # states (B, T, H)
        for row, m in zip(fused.states, fused.mask):
            out.append(row[m.bool()].to(torch.float16).clone())
        bar.update(len(chunk))
    bar.close()
    return out


class StateCache:
    """Frozen-encoder states per question id, on disk under WS/reader/cache/ keyed by context, passages, lengths and
    the encoder's weights (so a reader whose encoder changed never reads stale states)."""

    def __init__(self, workspace: Path, reader: FiDReader, cfg: ReaderConfig):
        key = (f"{cfg.context}-k{cfg.top_k}-L{cfg.passage_tokens}" + ("-q" if cfg.question_passage else "")
               + f"-{encoder_fingerprint(reader)}")
        self.path = Path(workspace) / "reader" / "cache" / f"{key}.pt"
        self.states: dict[int, torch.Tensor] = torch.load(self.path) if self.path.is_file() else {}

    @classmethod
    def in_memory(cls, states: dict[int, torch.Tensor]) -> "StateCache":
        """A cache of states already computed, never written (benchmarks, tests)."""
        cache = cls.__new__(cls)
        cache.path, cache.states = None, states
        return cache

    def ensure(self, reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], progress: bool) -> None:
        todo = [e for e in examples if e.question_id not in self.states]
        if not todo:
            return
        for e, s in zip(todo, encode_examples(reader, batcher, todo, progress=progress)):
            self.states[e.question_id] = s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        torch.save(self.states, tmp)
        os.replace(tmp, self.path)

    def fused(self, examples: list[ReaderExample]) -> tuple[torch.Tensor, torch.Tensor]:
        return pad_states([self.states[e.question_id].float() for e in examples])  # (B, T, H), (B, T)


def _fused(reader, batcher, cache, chunk, grad: bool) -> Fused:
    """What the decoder reads for a batch of examples: cached states (token ids re-derived by tokenising, for a
    copy pointer) or freshly encoded ones."""
    if cache is None:
        with torch.set_grad_enabled(grad):
            return reader.encode(*batcher.inputs(chunk))
    states, mask = cache.fused(chunk)  # (B, T, H), (B, T)
    ids = reader.fuse_ids(*batcher.inputs(chunk)) if reader.pointer is not None else None  # (B, T)
    if ids is not None and ids.shape != mask.shape:
        raise ValueError(f"cached reader states do not match the passages' tokens ({tuple(ids.shape)} vs "
                         f"{tuple(mask.shape)}): delete {cache.path} and rerun")
    return Fused(states, mask, ids)


def fit(reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], cfg: ReaderConfig,
        cache: StateCache | None, desc: str = "train", progress: bool = True) -> dict:
    """QA training: each epoch, each question once with one of its answers (drawn on the seed) as the target."""
    params = trainable(reader, cfg.train_encoder)
    reader.model.train()
    trainable(reader, cfg.train_encoder)
    steps = cfg.epochs * math.ceil(len(examples) / cfg.batch_size)
    opt, sched = _optimizer(params, cfg.lr, steps)
    rng = random.Random(cfg.seed)
    losses = []
    bar = _bar(steps, desc, "step", progress)
    t0 = time.perf_counter()
    for epoch in range(cfg.epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for i in range(0, len(order), cfg.batch_size):
            chunk = [examples[j] for j in order[i:i + cfg.batch_size]]
            labels = batcher.labels([rng.choice([a for a in e.answers if a.strip()] or [""]) for e in chunk])
            with autocast(cfg.bf16):
                loss = reader.loss(_fused(reader, batcher, cache, chunk, cfg.train_encoder), labels)
            losses.append(_step(loss, params, opt, sched, f"{desc} epoch {epoch}"))
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
    bar.close()
    secs = time.perf_counter() - t0
    n = len(examples) * cfg.epochs
    return {"examples": len(examples), "steps": steps, "seconds": round(secs, 1),
            "examples_per_second": round(n / secs, 2) if secs else None,
            "loss_first": float(np.mean(losses[:20])), "loss_last": float(np.mean(losses[-20:]))}


def predict(reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], cfg: ReaderConfig,
            cache: StateCache | None, progress: bool = True, batch: int = 8) -> list[str]:
    reader.model.eval()
    out: list[str] = []
    bar = _bar(len(examples), "generate", "q", progress)
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        with torch.no_grad():
            fused = _fused(reader, batcher, cache, chunk, False)
        out += reader.generate(fused, cfg.max_new_tokens, cfg.num_beams, cfg.no_repeat_ngram)
        bar.update(len(chunk))
    bar.close()
    return out


def start_path(workspace: Path, cfg: ReaderConfig) -> str | None:
    if cfg.preread and cfg.lookup:
        raise ValueError("--lookup starts from the answer-lookup model, which starts from the prereading itself: "
                         "drop --preread")
    if not (cfg.preread or cfg.lookup):
        return cfg.base
    path, stage = (lookup_dir(workspace, cfg.copy), "lookup" + (" --copy" if cfg.copy else "")) if cfg.lookup \
        else (preread_dir(workspace), "preread")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is missing: run `whoqa pretrain --reader {stage} --workspace {workspace}`")
    return str(path)


def load_start(workspace: Path, cfg: ReaderConfig) -> FiDReader:
    """The reader a QA run starts from (start_path), with a fresh copy pointer when cfg.copy and it has none."""
    path = start_path(workspace, cfg)
    reader = FiDReader.load(path)
    if cfg.copy:
        reader.add_pointer()
    elif reader.pointer is not None:
        raise ValueError(f"the reader at {path} has a copy pointer: add --copy")
    return reader


def start_record(workspace: Path, cfg: ReaderConfig) -> dict:
    """What a run starts from, saved with each fold ({"preread": its prereading config} and, for --lookup runs,
    {"lookup": the answer-lookup config}): a fold of an older pretraining is redone, never mixed in."""
    if cfg.lookup:
        meta = lookup_dir(workspace, cfg.copy) / "whoqa_reader.json"
        done = json.loads(meta.read_text()) if meta.is_file() else {}
        return {"preread": done.get("preread"), "lookup": done.get("config")}
    return {"preread": preread_record(workspace) if cfg.preread else None}


def preread_record(workspace: Path) -> dict | None:
    """The config of the prereading under WS/models/preread/ (None when there is none)."""
    meta = preread_dir(workspace) / "whoqa_reader.json"
    return json.loads(meta.read_text()).get("config") if meta.is_file() else None


def cross_validate(workspace: Path, cfg: ReaderConfig, progress: bool = True) -> dict:
    """Book-level k-fold: fold k's books are answered by a reader trained on the other folds' books. Each finished
    fold is a file (WS/reader/runs/<name>/fold<k>.json), so an interrupted run resumes at the next fold."""
    from whoqa.metrics import text_metrics
    if cfg.context not in CONTEXTS:
        raise ValueError(f"unknown reader context {cfg.context!r}: use one of {CONTEXTS}")
    ws = Path(workspace)
    name = run_name(cfg)
    run_dir = ws / "reader" / "runs" / name
    examples = build_examples(ws, cfg.context, cfg.top_k, progress)
    folds = book_folds(examples, cfg.folds, cfg.seed)
    start_path(ws, cfg)  # a missing pretraining fails before any work
    start = start_record(ws, cfg)
    archived = archive_other_run(ws, run_dir, cfg, start)
    atomic_write(run_dir / "config.json", json.dumps(asdict(cfg), indent=1))
    finished = {d["fold"] for d in current_folds(ws, run_dir)[1]}
    cache = None
    for k, test_books in enumerate(folds):
        path = run_dir / f"fold{k}.json"
        if k in finished:
            continue
        set_seed(cfg.seed + k)
        reader = load_start(ws, cfg)
        batcher = batcher_of(reader, cfg)
        held = set(test_books)
        train = [e for e in examples if e.document_id not in held][:cfg.max_train_samples]
        test = [e for e in examples if e.document_id in held][:cfg.max_eval_samples]
        if not cfg.train_encoder:
            cache = cache or StateCache(ws, reader, cfg)
            cache.ensure(reader, batcher, train + test, progress)
        stats = fit(reader, batcher, train, cfg, cache, f"{name} fold {k}", progress)
        stats["test_input_reliance"] = input_reliance(
            reader, lambda idx: _fused(reader, batcher, cache, [test[i] for i in idx], False),
            lambda idx: batcher.labels([test[i].answers[0] for i in idx]), len(test))
        t0 = time.perf_counter()
        preds = predict(reader, batcher, test, cfg, cache, progress)
        stats["generate_seconds_per_question"] = round((time.perf_counter() - t0) / max(1, len(test)), 3)
        reader.save(ws / "models" / "reader" / name / f"fold{k}", {"config": asdict(cfg), "fold": k,
                                                                     "test_books": test_books})
        rows = [{"question_id": e.question_id, "document_id": e.document_id, "prediction": p}
                for e, p in zip(test, preds)]
        atomic_write(path, json.dumps({"config": asdict(cfg), **start, "fold": k, "test_books": test_books,
                                       "stats": stats,
                                       "metrics": text_metrics(preds, [e.answers for e in test]),
                                       "predictions": rows}, indent=1))
    summary = summarize(run_dir, current_folds(ws, run_dir)[1], {e.question_id: e.answers for e in examples})
    return {**summary, "archived_earlier_run": archived}


def current_folds(workspace: Path, run_dir: Path) -> tuple[int, list[dict]]:
    """(folds the run has, its finished fold records made with its current config and pretraining start): a fold left
    over from an earlier config is not mixed into the results (fields added to ReaderConfig since count as their
    defaults)."""
    cfg = asdict(ReaderConfig(**json.loads((run_dir / "config.json").read_text())))
    start = start_record(workspace, ReaderConfig(**cfg))
    done = [json.loads(f.read_text()) for f in sorted(run_dir.glob("fold*.json"))]
    return cfg["folds"], [d for d in done if same_run(d, cfg, start)]


def same_run(fold: dict, cfg: dict, start: dict) -> bool:
    """A fold record was made by the run (config, pretraining start) given."""
    return (asdict(ReaderConfig(**fold.get("config", {}))) == cfg
            and all(with_defaults(k, fold.get(k)) == with_defaults(k, v) for k, v in start.items()))


def archive_other_run(workspace: Path, run_dir: Path, cfg: ReaderConfig, start: dict) -> str | None:
    """Move a run folder holding folds of another config or start to WS/reader/runs-archive/ (kept, never mixed in
    nor overwritten); returns what was moved, or None."""
    import shutil
    from whoqa.runs import digest
    folds = [json.loads(f.read_text()) for f in sorted(Path(run_dir).glob("fold*.json"))]
    other = [d for d in folds if not same_run(d, asdict(cfg), start)]
    if not other:
        return None
    dest = Path(workspace) / "reader" / "runs-archive" / f"{run_dir.name}@{digest(other[0].get('config'))}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(run_dir), str(dest))
    log.warning("%s: the earlier run was made with another config or start: kept in %s, redone", run_dir.name, dest)
    return str(dest)


def with_defaults(kind: str, record: dict | None) -> dict | None:
    """A pretraining config record ("preread" or "lookup") with fields added since it was saved at their defaults, so
    a new PrereadConfig/LookupConfig field never makes the runs started from an older record stale."""
    from whoqa.reader.lookup import LookupConfig
    cls = {"preread": PrereadConfig, "lookup": LookupConfig}[kind]
    known = {f.name for f in fields(cls)}
    return asdict(cls(**record)) if isinstance(record, dict) and set(record) <= known else record


def summarize(run_dir: Path, folds: list[dict], answers: dict[int, list[str]]) -> dict:
    """One run's fold records (current_folds) -> WS/reader/runs/<name>/summary.json."""
    from whoqa.metrics import text_metrics
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


def train_final(workspace: Path, cfg: ReaderConfig, progress: bool = True) -> dict:
    """One reader on every question of every book -> WS/models/reader/<name>/final (for `whoqa ask`)."""
    ws = Path(workspace)
    examples = build_examples(ws, cfg.context, cfg.top_k, progress)[:cfg.max_train_samples]
    set_seed(cfg.seed)
    reader = load_start(ws, cfg)
    batcher = batcher_of(reader, cfg)
    cache = None
    if not cfg.train_encoder:
        cache = StateCache(ws, reader, cfg)
        cache.ensure(reader, batcher, examples, progress)
    stats = fit(reader, batcher, examples, cfg, cache, f"{run_name(cfg)} final", progress)
    reader.save(ws / "models" / "reader" / run_name(cfg) / "final", {"config": asdict(cfg), "stats": stats})
    return {**stats, "name": run_name(cfg)}
