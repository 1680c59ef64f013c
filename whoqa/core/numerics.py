"""The same numbers on every x86 machine: CPU math libraries pinned to their AVX2 code paths.

Torch (ATen's vectorised kernels, MKL's GEMM, oneDNN) and NumPy/SciPy's OpenBLAS pick kernels by the CPU they run on.
An AVX-512 machine and an AVX2 machine then round differently, and 60 epochs of training turn the last bit into other
rankings: the main job once failed its own check on another machine with book frequency equal to the last digit.
Pinned to AVX2 (every x86 CPU of the last decade has it), the results are bit-identical across machines and across
machines. Imported before torch or NumPy by `whoqa` and `data_prep`; a variable the user set is kept. The number of
intra-op threads changes some results too (ATen splits small-output reductions by thread): the memory network's
stages fix it from their config (`intra_op_threads`).
"""
from __future__ import annotations

import os
import platform
from contextlib import contextmanager

PINNED = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels
    "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (linear layers, convolutions)
    "OPENBLAS_CORETYPE": "Haswell",  # NumPy/SciPy's BLAS (word2vec's dot products)
}


def pin() -> dict[str, str]:
    """Set the variables not set yet (x86 only); returns the values in force."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        for k, v in PINNED.items():
            os.environ.setdefault(k, v)
    return {k: os.environ[k] for k in PINNED if k in os.environ}


pin()


@contextmanager
def intra_op_threads(n: int):
    """Torch's intra-op threads set to n for the block (and restored): the memory network's results depend on them
    (ATen splits some reductions by thread), so its stages run with the count their config records (1 by default:
    the network is small, and one thread gives the same numbers on every machine)."""
    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(old)
