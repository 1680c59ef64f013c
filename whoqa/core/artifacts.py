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
    """The rows of a resumable JSONL file (one finished piece of work per line; gzipped where it ends .gz); a line
    cut by an interruption (or not an object) is skipped, so its work is done again. [] when the file does not
    exist."""
    rows = []
    if Path(path).is_file():
        import gzip
        opener = gzip.open if Path(path).suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            try:
                for line in f:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict):
                        rows.append(row)
            except (EOFError, OSError):  # a gzip member cut by an interruption: the rows before it stand
                pass
    return rows


# --- binary artifacts: a checksum recorded by the writer -----------------------------------------------------------
# A model, word vectors or compressed questions cannot be checked by parsing: their writer records each file's sha256
# in a sidecar (<name>.sha256, "<hex>  <file name>" per line, the files written beside it too), `whoqa check` and the
# readers compare, and a reader that still cannot load the file says so as DamagedArtifact, never a loader's own
# traceback (zlib.error, UnpicklingError, an AssertionError).
CHECKSUM_SUFFIX = ".sha256"


def checksum_file(path: Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def file_sha256(path: Path) -> str:
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def forget_checksum(path: Path) -> None:
    """Drop an artifact's record before the artifact is replaced: a writer killed between the two then leaves a file
    with no record (not checked) rather than a record of the old bytes (taken for damage)."""
    checksum_file(path).unlink(missing_ok=True)


def record_checksum(path: Path, *beside: Path) -> None:
    """Record the sha256 of a binary artifact just written (and of the files written with it, e.g. gensim's arrays);
    its writer calls `forget_checksum` before replacing it."""
    import os
    import uuid
    path = Path(path)
    lines = "".join(f"{file_sha256(p)}  {Path(p).name}\n" for p in (path, *beside))
    side = checksum_file(path)
    tmp = side.with_name(f"{side.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_text(lines, encoding="utf-8")
    os.replace(tmp, side)


def verify_checksum(path: Path, repair: str) -> bool:
    """DamagedArtifact when the artifact (or a file recorded with it) is empty, missing or not the bytes its writer
    recorded; True when checked, False for an artifact written before checksums were kept (nothing to compare)."""
    path = Path(path)
    if path.is_file() and path.stat().st_size == 0:
        raise DamagedArtifact(path, "the file is empty (a write cut short)", repair)
    side = checksum_file(path)
    if not side.is_file():
        return False
    try:
        recorded = [line.split("  ", 1) for line in side.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise DamagedArtifact(side, problem(e), repair) from None
    if not recorded or any(len(r) != 2 or len(r[0]) != 64 for r in recorded):
        raise DamagedArtifact(side, "not a checksum record", repair)
    for digest, name in recorded:
        f = path.with_name(name)
        if not f.is_file():
            raise DamagedArtifact(f, "missing (its checksum is recorded)", repair)
        if file_sha256(f) != digest:
            raise DamagedArtifact(f, "its sha256 differs from the one recorded when it was written", repair)
    return True


def load_binary(path: Path, loader, repair: str):
    """loader(path) of a binary artifact, its checksum verified first; any failure to load it is DamagedArtifact
    (a missing file stays FileNotFoundError: an earlier stage to run, not damage)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: {repair}")
    verify_checksum(path, repair)
    try:
        return loader(path)
    except DamagedArtifact:
        raise
    except Exception as e:  # whatever the loader raises on bad bytes (zlib.error, UnpicklingError, AssertionError)
        raise DamagedArtifact(path, problem(e), repair) from None
