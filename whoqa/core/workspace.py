"""The workspace folder: one lock, so two commands that add books (prepare, ask --text, eval --data) never lose
each other's work."""
from __future__ import annotations

import fcntl
import logging
import os
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)
_held: dict[str, int] = {}  # workspace -> depth of nested `locked` in this process (flock is not re-entrant)


class WorkspaceError(ValueError):
    """The workspace path cannot be used; the message says why and what to do."""


class MissingStage(FileNotFoundError):
    """An earlier stage's artifacts are missing; the message says which command to run."""


def check_workspace(workspace: str | Path) -> Path:
    ws = Path(workspace)
    if ws.exists() and not ws.is_dir():
        raise WorkspaceError(f"workspace {ws} is a file, not a folder: pass --workspace with a folder path")
    return ws


@contextmanager
def locked(workspace: str | Path):
    """Hold WS/.lock exclusively (waits for another holder, saying so). Released when the process ends, however."""
    ws = check_workspace(workspace)
    ws.mkdir(parents=True, exist_ok=True)
    key = str(ws.resolve())
    if _held.get(key):
        _held[key] += 1
        try:
            yield ws
        finally:
            _held[key] -= 1
        return
    fd = os.open(ws / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("workspace %s is in use by another whoqa command; waiting for it to finish", ws)
            fcntl.flock(fd, fcntl.LOCK_EX)
        _held[key] = 1
        yield ws
    finally:
        _held.pop(key, None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
