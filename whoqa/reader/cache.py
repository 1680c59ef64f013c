"""The frozen encoder's states, computed once per question and cached on disk: on a CPU the encoder is frozen by
default (Mou et al. Table 3: prereading "helps decoders mostly"), so all folds, epochs and runs of a context share
them. `fused_inputs` gives the decoder a batch's states, cached or freshly encoded."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch

from whoqa.core.progress import bar as progress_bar
from whoqa.reader.config import ReaderConfig
from whoqa.reader.data import Batcher, ReaderExample
from whoqa.reader.model import FiDReader, Fused, pad_states
from whoqa.core.workspace import Workspace
from whoqa.core.distributed import gather, shard, world


def encoder_fingerprint(reader: FiDReader) -> str:
    h = hashlib.sha256()
    params = list(reader.encoder().parameters())
    for p in (params[0], params[-1]):
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:12]


@torch.no_grad()
def encode_examples(reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], batch: int = 4,
                    progress: bool = True) -> list[torch.Tensor]:
    """Fused encoder states of each example, (T_i, H) in float16 in host memory (a GPU's memory holds a batch, not
    every question's states): what the decoder reads when the encoder is frozen."""
    reader.encoder().eval()
    out: list[torch.Tensor] = []
    bar = progress_bar(total=len(examples), desc="encode passages", unit="q", progress=progress)
    for i in range(0, len(examples), batch):
        chunk = examples[i:i + batch]
        ids, mask, counts = batcher.inputs(chunk)
        fused = reader.encode(ids, mask, counts)  # states (B, T, H)
        for row, m in zip(fused.states, fused.mask):
            out.append(row[m.bool()].to(torch.float16).cpu().clone())
        bar.update(len(chunk))
    bar.close()
    return out


class StateCache:
    """Frozen-encoder states per question id, on disk under WS/reader/cache/ keyed by context, passages, lengths and
    the encoder's weights (so a reader whose encoder changed never reads stale states)."""

    def __init__(self, workspace: Path, reader: FiDReader, cfg: ReaderConfig):
        key = (f"{cfg.context}-k{cfg.top_k}-L{cfg.passage_tokens}" + ("-q" if cfg.question_passage else "")
               + f"-{encoder_fingerprint(reader)}")
        self.path = Workspace(workspace).reader / "cache" / f"{key}.pt"
        self.states: dict[int, torch.Tensor] = torch.load(self.path) if self.path.is_file() else {}

    @classmethod
    def in_memory(cls, states: dict[int, torch.Tensor]) -> "StateCache":
        """A cache of states already computed, never written (benchmarks, tests)."""
        cache = cls.__new__(cls)
        cache.path, cache.states = None, states
        return cache

    def ensure(self, reader: FiDReader, batcher: Batcher, examples: list[ReaderExample], progress: bool) -> None:
        """Encode the examples not cached yet (under torchrun: each process its share, gathered) and save."""
        todo = [e for e in examples if e.question_id not in self.states]
        if not todo:
            return
        w = world()
        states = gather(encode_examples(reader, batcher, shard(todo, w), progress=progress and w.main), w)
        for e, s in zip(todo, states):
            self.states[e.question_id] = s
        if not w.main:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        torch.save(self.states, tmp)
        os.replace(tmp, self.path)

    def fused(self, examples: list[ReaderExample], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch's states, padded on the host and moved to device in float16 (half the transfer), then float32."""
        states, mask = pad_states([self.states[e.question_id] for e in examples])  # (B, T, H), (B, T)
        return states.to(device).float(), mask.to(device)


def fused_inputs(reader, batcher, cache, chunk, grad: bool) -> Fused:
    """What the decoder reads for a batch of examples, on the reader's device: cached states (token ids re-derived
    by tokenising, for a copy pointer) or freshly encoded ones."""
    if cache is None:
        with torch.set_grad_enabled(grad):
            return reader.encode(*batcher.inputs(chunk))
    states, mask = cache.fused(chunk, reader.device)  # (B, T, H), (B, T)
    ids = reader.fuse_ids(*batcher.inputs(chunk)) if reader.pointer is not None else None  # (B, T) on the host
    ids = ids if ids is None else ids.to(reader.device)
    if ids is not None and ids.shape != mask.shape:
        raise ValueError(f"cached reader states do not match the passages' tokens ({tuple(ids.shape)} vs "
                         f"{tuple(mask.shape)}): delete {cache.path} and rerun")
    return Fused(states, mask, ids)

