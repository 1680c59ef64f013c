"""One training step of the reader and what it needs: which parameters train, AdamW with warm-up and decay, mixed
precision on the model's device, a guarded step (non-finite loss -> a clear error), and the input-reliance
measurement."""
from __future__ import annotations

import logging

import torch

from whoqa.core.device import bf16_slowdown, mixed_precision
from whoqa.reader.config import ReaderConfig
from whoqa.reader.data import Batcher
from whoqa.reader.model import FiDReader

log = logging.getLogger(__name__)


def decoder_start_id(reader: FiDReader) -> int | None:
    return reader.model.config.decoder_start_token_id if reader.model.config.model_type == "encoder-decoder" else None


def batcher_of(reader: FiDReader, cfg: ReaderConfig) -> Batcher:
    return Batcher(reader.tokenizer, cfg.passage_tokens, cfg.answer_tokens, decoder_start_id(reader), cfg.question_passage)


def trainable(reader: FiDReader, train_encoder: bool) -> list[torch.nn.Parameter]:
    enc = reader.encoder()
    enc.requires_grad_(train_encoder)
    if not train_encoder:
        enc.eval()  # frozen: no dropout, so cached states equal fresh ones
    return [p for p in reader.parameters() if p.requires_grad]  # the model's and the copy pointer's


def optimizer(params, lr: float, steps: int):
    from transformers import get_linear_schedule_with_warmup
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, foreach=True)  # multi-tensor: ~1.4x faster on CPU
    return opt, get_linear_schedule_with_warmup(opt, max(1, steps // 20), max(1, steps))


class Precision:
    """How training steps compute on a device (whoqa.core.device.mixed_precision): with mixed precision on, matmuls
    in bfloat16 on CPUs and Ampere+ GPUs, or in float16 with a loss scaler on older GPUs; weights and optimizer state
    stay float32. Off: float32 throughout, and so on a CPU where bfloat16 is measured slower (cpu_bf16_speedup)."""

    def __init__(self, device: torch.device, enabled: bool):
        dtype, scaled = mixed_precision(device)
        if enabled and (slower := bf16_slowdown(device)):
            log.warning("bfloat16 matmuls are %.0fx slower than float32 on this CPU: training in float32 (--bf16 has "
                        "no effect here)", slower)
            enabled = False
        self.device, self.dtype, self.enabled = device, dtype, enabled
        self.name = str(dtype).removeprefix("torch.") if enabled else "float32"  # what the matmuls ran in (records)
        self.scaler = torch.amp.GradScaler(device.type, enabled=enabled and scaled)  # disabled: a pass-through

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=self.enabled)

    def step(self, loss: torch.Tensor, params, opt, sched, what: str, logged: torch.Tensor | None = None) -> float:
        """Backward, clip at 1, step; returns the step's loss (logged: the global batch's, of a data-parallel step,
        whoqa.core.distributed). A non-finite loss is a clear error (a scaled float16 overflow is skipped by the
        scaler, as it should be, and never reaches here as a loss)."""
        logged = loss if logged is None else logged
        if not torch.isfinite(logged):
            raise FloatingPointError(f"non-finite reader loss at {what}: lower --lr or check the inputs")
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(opt)
        self.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, 1.0))  # before clipping
        self.scaler.step(opt)
        self.scaler.update()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return float(logged.detach())


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

