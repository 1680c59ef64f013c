"""One seed fixes every random choice: Python's, NumPy's and torch's generators, and Python's string hashing.

String hashing: Python randomises it per process, and the name clustering BookNLP's code does iterates over sets of
strings, so the same book could get other characters from one run to the next (seen on 1 of 136 books, enough to move
the main job's P@1 by 4 points). It is fixed before Python starts (PYTHONHASHSEED): the `whoqa` command re-executes
itself once with it (`reexec_with_fixed_hash_seed`); the Python API, which cannot restart its caller, makes books in
child processes started with it (`hash_seed_fixed`, `fixed_hash_seed_env`), and a book it adds in its own process has
its names clustered in such a child (data_prep.characters._name_refs), as BookNLP's engine runs in one: no result
depends on the caller's seed.
"""
from __future__ import annotations

import os
import random
import sys
from contextlib import contextmanager

import numpy as np

SEED = 13  # the default seed of every stage (folds, trials, samples, training)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    import torch  # only the model stages need torch; data preparation imports this module without it
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)  # (CPU kernels are; a GPU's scatter/index ops may not be)


HASH_SEED = "0"  # PYTHONHASHSEED of every process that makes books


def hash_seed_fixed() -> bool:
    """Whether this process hashes strings as every whoqa process does (it started with PYTHONHASHSEED=0)."""
    return sys.flags.hash_randomization == 0


def reexec_with_fixed_hash_seed(argv: list[str]) -> None:
    """Start this program again with PYTHONHASHSEED fixed to whoqa's when it is not (the command line's guard): unset,
    random or another seed, a result never depends on it."""
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *argv])


@contextmanager
def fixed_hash_seed_env():
    """Child processes started inside hash strings as whoqa does, whatever this process's own seed."""
    old = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = HASH_SEED
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = old
