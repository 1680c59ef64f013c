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
    known; the line is cleared at the end, so only the answer stays. Drawn only when `on` and stderr is a terminal
    (and not WHOQA_NO_PROGRESS=1); `now()` says the stage either way (the page shows it: `GET /api/progress`)."""

    def __init__(self, on: bool = False):
        import sys
        self.on = on and enabled() and sys.stderr.isatty()
        self._bar = None
        self._shown = False
        self.current: dict | None = None  # the stage now, drawn or not, for a page to show: {"stage", "done",
        #                                   "total"} (None between stages)

    def now(self) -> dict | None:
        """The stage under way with its percent where the amount of work is known (a copy: another thread reads it)."""
        c = self.current
        if c is None:
            return None
        out = {"stage": c["stage"]}
        if c.get("total"):
            out["percent"] = min(100, int(100 * c["done"] / c["total"]))
        return out

    def stage(self, what: str, total: int | None = None, unit: str = "it"):
        """Start a stage (ending the one before); returns what advances its bar by n (a no-op without a total)."""
        import sys
        self.done()
        current = self.current = {"stage": what, "done": 0, "total": total or 0}

        def advance(n=1):
            current["done"] += n
            if self._bar is not None and self.current is current:
                self._bar.update(n)
        if not self.on:
            return advance
        if total:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=total, desc=what, unit=unit, leave=False, file=sys.stderr, dynamic_ncols=True)
            return advance
        sys.stderr.write(f"\r\033[K{what}...")
        sys.stderr.flush()
        self._shown = True
        return advance

    def done(self) -> None:
        """Clear the stage's line (or bar)."""
        import sys
        self.current = None
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self._shown = False
