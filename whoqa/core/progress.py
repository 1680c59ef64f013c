"""Progress bars for long work, one rule for all: off with progress=False or WHOQA_NO_PROGRESS=1 (tests, logs)."""
from __future__ import annotations

import os


def enabled(progress: bool = True) -> bool:
    return progress and os.environ.get("WHOQA_NO_PROGRESS") != "1"


def bar(iterable=None, total: int | None = None, desc: str = "", unit: str = "it", progress: bool = True):
    from tqdm.auto import tqdm
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled(progress))


class Stages:
    """What a long first answer is doing, for a person waiting at a terminal: the stage on one line of stderr that
    the next stage replaces ("reading the book", "finding the characters", ...), a bar where the amount of work is
    known; the line is cleared at the end, so only the answer stays. Silent (every call a no-op) unless `on` and
    stderr is a terminal (and not WHOQA_NO_PROGRESS=1)."""

    def __init__(self, on: bool = False):
        import sys
        self.on = on and enabled() and sys.stderr.isatty()
        self._bar = None
        self._shown = False

    def stage(self, what: str, total: int | None = None, unit: str = "it"):
        """Start a stage (ending the one before); returns what advances its bar by n (a no-op without a total)."""
        import sys
        self.done()
        if not self.on:
            return lambda n=1: None
        if total:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=total, desc=what, unit=unit, leave=False, file=sys.stderr, dynamic_ncols=True)
            return lambda n=1: self._bar.update(n) if self._bar is not None else None
        sys.stderr.write(f"\r\033[K{what}...")
        sys.stderr.flush()
        self._shown = True
        return lambda n=1: None

    def done(self) -> None:
        """Clear the stage's line (or bar)."""
        import sys
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self._shown = False
