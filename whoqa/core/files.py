"""File helpers every layer writes through: `atomic_write` (a temporary file renamed into place, so a crash never
leaves a half-written file) and `file_mode` (the mode a new file gets under the umask)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write text (UTF-8) or bytes through a temporary file and rename, so a crash never leaves a half-written file
    behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())  # (mkstemp makes it 0600: an artifact is as readable as any file the user writes)
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8", newline="")) as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def file_mode() -> int:
    """The mode a new file gets under the process's umask (0644 under the usual 022)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # (no /proc: read it by setting it, and put it back at once)
    os.umask(mask)
    return 0o666 & ~mask
