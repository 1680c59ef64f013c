"""One seed fixes every random choice: Python's, NumPy's and torch's generators."""
from __future__ import annotations

import random

import numpy as np

SEED = 13  # the default seed of every stage (folds, trials, samples, training)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    import torch  # only the model stages need torch; data preparation imports this module without it
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)  # (CPU kernels are; a GPU's scatter/index ops may not be)
