"""Where per-book work runs: `local` (this machine's process pool, `--jobs`) or `ray` (a Ray cluster, for a corpus
larger than one machine). Ray is imported only on the ray path, so the local commands start as fast without it.

On Ray each item is one task with its CPUs and memory declared; a task whose node dies (kill -9, a lost machine) is
retried on another node by Ray (`retries` times, counted), and its result comes back to the driver, which alone writes
the workspace: workers need no writable shared filesystem, and the workspace's lock and atomic writes stay where they
are. A worker runs the stage's initializer once per process (its engine, for `prepare`) before its first task.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator

from whoqa.core.registry import Registry

EXECUTORS = Registry("executor", ("local", "ray"))


@dataclass
class ExecutorConfig:
    executor: str = "local"  # local | ray
    ray_address: str | None = None  # a Ray cluster: auto, HOST:PORT, or ray://HOST:PORT (None: $RAY_ADDRESS, else auto)
    task_cpus: float = 1.0  # CPUs a task declares (one book is one process's work)
    task_memory_mb: int = 2000  # memory a task declares: spaCy and a long book's parse
    retries: int = 2  # a task whose node or worker died is run again this many times

    def __post_init__(self):
        EXECUTORS.check(self.executor)
        if self.task_cpus <= 0 or self.task_memory_mb <= 0 or self.retries < 0:
            raise ValueError(f"an executor's task needs CPUs and memory above 0 and retries of 0 or more, not "
                             f"{self.task_cpus}, {self.task_memory_mb} MB, {self.retries}")

    def check(self) -> "ExecutorConfig":
        EXECUTORS.check(self.executor)  # (a field set after it was made)
        return self


_ready: dict[str, object] = {}  # per worker process: the initializers already run (their key)


def _in_worker(fn, args, initializer, initargs, key):
    if initializer is not None and key not in _ready:
        initializer(*initargs)
        _ready[key] = True
    return fn(*args)


def ray_map(fn: Callable, args: dict[str, tuple], cfg: ExecutorConfig, failed: Callable[[str, str], object],
            initializer: Callable | None = None, initargs: tuple = (), stats: dict | None = None) -> Iterator:
    """fn(*args[key]) for every key as Ray tasks on the cluster at cfg.ray_address, yielding results as they finish
    (the order of completion); an item whose task failed on every try yields failed(key, why) instead, and the others
    go on. `stats` receives the tasks submitted and those that failed."""
    try:
        import ray
    except ImportError:
        raise RuntimeError("--executor ray needs Ray: pip install 'ray[default]' (install.sh installs it)") from None
    address = cfg.ray_address or os.environ.get("RAY_ADDRESS") or "auto"
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR",
                     runtime_env={"env_vars": {"PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}})
        except ConnectionError as e:
            raise RuntimeError(f"no Ray cluster at {address}: start one (`ray start --head`) or pass --ray-address "
                               f"HOST:PORT ({str(e).splitlines()[0]})") from None
    task = ray.remote(num_cpus=cfg.task_cpus, memory=cfg.task_memory_mb * 2 ** 20, max_retries=cfg.retries,
                      retry_exceptions=False)(_in_worker)
    key = repr((getattr(initializer, "__qualname__", None), initargs))
    pending = {task.remote(fn, a, initializer, initargs, key): k for k, a in args.items()}
    if stats is not None:
        stats.update(tasks=len(pending), failed=0)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        ref = done[0]
        k = pending.pop(ref)
        try:
            yield ray.get(ref)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.RayTaskError) as e:  # retries spent: the item fails alone, the others go on
            if stats is not None:
                stats["failed"] += 1
            yield failed(k, f"{type(e).__name__}: its task failed on {cfg.retries + 1} tries: "
                            f"{str(e).splitlines()[0]}")
