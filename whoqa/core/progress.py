"""Progress bars for long work, one rule for all: off with progress=False or WHOQA_NO_PROGRESS=1 (tests, logs)."""
from __future__ import annotations

import os


def enabled(progress: bool = True) -> bool:
    return progress and os.environ.get("WHOQA_NO_PROGRESS") != "1"


def bar(iterable=None, total: int | None = None, desc: str = "", unit: str = "it", progress: bool = True):
    from tqdm.auto import tqdm
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled(progress))
