"""Several processes: `torchrun --nproc_per_node N cli.py ...` (or `accelerate launch`, which starts the same
torch.distributed processes; `--nnodes` and a rendezvous address span machines). Each process runs the same command;
torch.distributed (NCCL on GPUs, gloo on CPUs) joins them.

What is split: training steps are data-parallel with DistributedDataParallel (each process takes its share of every
global batch; gradients are averaged in the backward pass), with the loss normalised by the whole batch's target
count, so a step is the step one process would take on the same batch; answering and scoring are sharded by question
and gathered back in order. Only the first process writes files. With one process (no WORLD_SIZE) nothing changes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# torch is imported where it is used: commands that need no model (`--help`, `check`, `serve`'s start) never load it


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """The process that writes results and checkpoints."""
        return self.rank == 0


def world() -> World:
    """This process's place among those torchrun / accelerate launch started (joining them the first time)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World()
    import torch
    import torch.distributed as dist
    if not dist.is_initialized():
        check_gpus(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), torch.cuda.device_count())
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def check_gpus(processes: int, gpus: int) -> None:
    """NCCL gives each process of a machine its own GPU: more processes than GPUs would end in an NCCL traceback at
    the first step, so it is one line before anything starts (a CPU-only machine joins any number with gloo)."""
    if gpus and processes > gpus:
        raise RuntimeError(f"torchrun started {processes} processes on this machine, which has {gpus} GPU"
                           f"{'s' * (gpus != 1)}: each needs its own, so use --nproc_per_node {gpus} (or --device cpu "
                           f"on a machine without GPUs)")


def process_device(device: torch.device, w: World) -> torch.device:
    """A process's own GPU when several share a machine (cuda -> cuda:LOCAL_RANK); a CPU is shared."""
    import torch
    if device.type == "cuda" and device.index is None and w.size > 1:
        return torch.device("cuda", w.local_rank)
    return device


def shard(items: list, w: World) -> list:
    """This process's share of items (every size-th, from its rank)."""
    return items[w.rank::w.size]


def gather(part: list, w: World) -> list:
    """Every process's shard (as `shard` cut it) -> the whole list in its original order, on every process."""
    if w.size == 1:
        return part
    import torch.distributed as dist
    parts: list = [None] * w.size
    dist.all_gather_object(parts, part)
    return [parts[r][i] for i in range(max(len(p) for p in parts)) for r in range(w.size) if i < len(parts[r])]


def barrier(w: World) -> None:
    if w.size > 1:
        import torch.distributed as dist
        dist.barrier()


def data_parallel(module: torch.nn.Module, w: World):
    """The module wrapped for data-parallel steps (its trainable parameters as they are now), or None alone."""
    if w.size == 1:
        return None
    import torch
    from torch.nn.parallel import DistributedDataParallel

    class _Step(torch.nn.Module):
        """A module whose forward runs a given loss function, so DistributedDataParallel sees the forward it syncs."""

        def __init__(self, module: torch.nn.Module):
            super().__init__()
            self.module = module

        def forward(self, loss_fn):
            return loss_fn()
    device = next(module.parameters()).device
    # find_unused_parameters: a trainable part may take no part in the loss (a BERT encoder's pooler in bert2bert)
    return DistributedDataParallel(_Step(module), device_ids=[device] if device.type == "cuda" else None,
                                   find_unused_parameters=True)


def global_mean_loss(ddp, w: World, idx: list, loss_of) -> tuple[torch.Tensor, torch.Tensor]:
    """One training step's losses: (what this process back-propagates, the global batch's mean loss).

    Alone (ddp None): loss_of(idx), the batch's mean loss, both times. Data-parallel: loss_of(indices, "sum") ->
    (summed loss, target count) over this process's items of the global batch idx; a process whose share is empty runs
    one item at weight 0 (every process must take part in the gradient all-reduce)."""
    if ddp is None:
        loss = loss_of(idx)
        return loss, loss
    import torch
    import torch.distributed as dist
    mine = shard(idx, w)
    weight = 1.0 if mine else 0.0
    loss_sum, count = ddp(lambda: loss_of(mine or idx[:1], "sum"))
    totals = torch.tensor([float(loss_sum.detach()) * weight, float(count) * weight], dtype=torch.float64,
                          device=loss_sum.device)  # (2,) summed loss, targets
    dist.all_reduce(totals)
    n = totals[1].clamp_min(1.0)
    return loss_sum * weight * w.size / n, totals[0] / n  # DDP averages gradients over the processes
