"""How many processes a stage uses by default: one per core (results never depend on it); whether the process
that owns a piece of work is still alive (a job recorded as running by a server killed since is not); and worker
processes that end with their parent."""
from __future__ import annotations

import os


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)


def process_identity(pid: int | None = None) -> str:
    """A process's id and start time ("pid:start"), so a reused pid is not taken for the process that recorded it."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks since boot
    except (OSError, IndexError):
        start = "?"
    return f"{pid}:{start}"


def process_alive(identity: str | None) -> bool:
    """Whether the process `process_identity` named is still running (False for no identity: a record written before
    owners were kept, by a process long gone)."""
    if not identity or ":" not in identity:
        return False
    pid, start = identity.split(":", 1)
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:  # alive, another user's
        return start == "?" or process_identity(int(pid)) == identity
    return start == "?" or process_identity(int(pid)) == identity


def die_with_parent() -> None:
    """A worker process (a book's, a parse's) never outlives the whoqa process (Linux: PR_SET_PDEATHSIG), and
    leaves Ctrl-C to the parent."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: workers end when they next hear from the parent
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)
