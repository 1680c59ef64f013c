"""Book prereading's corruption (Mou et al. §4.1, after BART's text infilling, Lewis et al. 2019): span lengths from
Poisson(3) until 15% of a passage's tokens are covered, spans at uniform non-overlapping positions, each span replaced
by one mask token whatever its length (a 0-length span inserts a mask, as in BART)."""
from __future__ import annotations

import numpy as np


def span_lengths(n_tokens: int, rng: np.random.Generator, ratio: float = 0.15, lam: float = 3.0) -> list[int]:
    """Poisson(lam) span lengths whose sum is round(ratio * n_tokens) (the last span is cut to fit)."""
    target = int(round(ratio * n_tokens))
    out: list[int] = []
    total = 0
    while total < target:
        k = int(rng.poisson(lam))
        k = min(k, target - total)
        out.append(k)
        total += k
    return out


def mask_spans(ids: list[int], mask_id: int, rng: np.random.Generator, ratio: float = 0.15,
               lam: float = 3.0) -> tuple[list[int], list[tuple[int, int]]]:
    """(corrupted ids, spans as (start in the original, length)). Spans are placed by drawing, for each, one of the
    gaps between the unmasked tokens uniformly, so they never overlap."""
    lengths = span_lengths(len(ids), rng, ratio, lam)
    if not lengths:
        return list(ids), []
    kept = len(ids) - sum(lengths)
    order = rng.permutation(len(lengths))
    gaps = np.sort(rng.integers(0, kept + 1, size=len(lengths)))  # gap g = before the g-th kept token
    out: list[int] = []
    spans: list[tuple[int, int]] = []
    src = 0  # position in the original
    kept_seen = 0
    for gap, j in zip(gaps, order):
        take = int(gap) - kept_seen  # kept tokens before this span
        out += ids[src:src + take]
        src += take
        kept_seen += take
        spans.append((src, lengths[j]))
        out.append(mask_id)
        src += lengths[j]
    out += ids[src:]
    return out, spans
