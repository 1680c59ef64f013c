"""The same numbers on every x86 machine: CPU math libraries pinned to their AVX2 code paths.

Torch (ATen's vectorised kernels, MKL's GEMM, oneDNN) and NumPy/SciPy's OpenBLAS pick kernels by the CPU they run on.
An AVX-512 machine and an AVX2 machine then round differently, and 60 epochs of training turn the last bit into other
rankings: the main job once failed its own check on another machine with book frequency equal to the last digit.
Pinned to AVX2 (every x86 CPU of the last decade has it), the results are bit-identical across machines and across
1 or 2 intra-op threads (docs/who-ranker.md, `whoqa bench --stage threads`). Imported before torch or NumPy by
`whoqa` and `data_prep`; a variable the user set is kept.
"""
from __future__ import annotations

import os
import platform

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
