"""The one place a workspace's JSON is parsed, and one error rule for damaged workspace state: a file that exists but cannot be read (truncated, unparsable, the
wrong shape) ends the command with one line naming the file, what is wrong, and the command that rebuilds it
(exit 2, as every expected error; `whoqa --debug` shows the traceback). Caches (memory arrays, a book's Lucene
index) are rebuilt instead, with a warning.

Each artifact's reader (named in docs/architecture.md) reads through these: `read_json` (must exist), `read_record`
(may be missing), `read_cache` (missing or damaged: remade), `read_rows` (JSONL of resumable work).
"""
from __future__ import annotations

import json
from pathlib import Path


class DamagedArtifact(ValueError):
    def __init__(self, path: Path | str, problem: str, repair: str):
        self.path, self.problem, self.repair = str(path), problem, repair
        super().__init__(f"{path} is damaged ({problem}): {repair}")


def problem(e: BaseException) -> str:
    """A short description of a load failure."""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:160] if text else type(e).__name__


def read_json(path: Path, repair: str, shape: type | tuple = (dict, list)):
    """A JSON artifact, or DamagedArtifact when it cannot be parsed or is not of `shape`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DamagedArtifact(path, f"not valid JSON: {problem(e)}", repair) from None
    if not isinstance(data, shape):
        want = " or ".join(t.__name__ for t in (shape if isinstance(shape, tuple) else (shape,)))
        raise DamagedArtifact(path, f"holds a {type(data).__name__} where a {want} belongs", repair)
    return data


def read_record(path: Path, repair: str, default=None, shape: type | tuple = dict):
    """A JSON artifact that may not exist yet: `default` when it is missing, DamagedArtifact when unreadable."""
    return read_json(path, repair, shape) if Path(path).is_file() else default


def read_cache(path: Path, shape: type | tuple = (dict, list)):
    """A cached JSON file, or None when it is missing or damaged (the caller makes it again)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, shape) else None


def read_rows(path: Path) -> list[dict]:
    """The rows of a resumable JSONL file (one finished piece of work per line); a line cut by an interruption (or
    not an object) is skipped, so its work is done again. [] when the file does not exist."""
    rows = []
    if Path(path).is_file():
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    return rows
