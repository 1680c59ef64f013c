"""Fault injection on `whoqa prepare --jobs 2`: a worker killed by pid costs no book, and workers never outlive a
killed parent."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import DYING_DETECTIVE, SHORT_BOOKS

ROOT = Path(__file__).resolve().parents[1]


def _start(data: Path, ws: Path, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    books = [x for b in [DYING_DETECTIVE, *SHORT_BOOKS, *extra] for x in ("--book", b)]
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "prepare", "--data", str(data), "--workspace",
                             str(ws), "--jobs", "2", "--no-artificial", "--no-embeddings", *books], cwd=ROOT,
                            env={**os.environ, "WHOQA_NO_PROGRESS": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            # a shell's background job (`.ci/run &`) inherits SIGINT ignored, and so would whoqa
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _workers(pid: int) -> list[int]:
    """The pool's worker processes of pid (spawned children that are not multiprocessing's resource tracker)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        for child in (task / "children").read_text().split():
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "spawn_main" in cmd and "resource_tracker" not in cmd:
                out.append(int(child))
    return out


def _wait_for_workers(proc: subprocess.Popen, n: int = 1, limit: float = 120) -> list[int]:
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        found = _workers(proc.pid)
        if len(found) >= n:
            return found
        time.sleep(0.2)
    raise AssertionError("no worker process appeared")


LONG_BOOK = "0d0bc01441afbec48663e3b38827e1529a287765"  # The Spoilers, 88k words: still running when a test acts


def _add_long_book(mini_data: Path, shared_data: Path) -> None:
    import shutil
    shutil.copy(shared_data / "books" / f"{LONG_BOOK}.txt", mini_data / "books" / f"{LONG_BOOK}.txt")
    row = next(l for l in (shared_data / "narrativeqa" / "documents.csv").read_text().splitlines()
               if l.startswith(LONG_BOOK))
    with open(mini_data / "narrativeqa" / "documents.csv", "a") as f:
        f.write(row + "\n")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _kill_a_busy_worker(proc: subprocess.Popen) -> None:
    """SIGKILL one of the pool's workers that is alive now (the short books may finish, and their pool go, within
    seconds on a fast machine; the long book keeps a pool busy)."""
    _wait_for_workers(proc, 2)
    time.sleep(3)  # let them start on their books
    end = time.monotonic() + 120
    while time.monotonic() < end and proc.poll() is None:
        for victim in _workers(proc.pid):
            try:
                os.kill(victim, signal.SIGKILL)
                return
            except ProcessLookupError:  # gone between listing and kill: take another
                continue
        time.sleep(0.1)
    raise AssertionError("no live worker to kill")


def test_a_killed_worker_loses_no_book(mini_data, shared_data, tmp_path):
    _add_long_book(mini_data, shared_data)
    ws = tmp_path / "ws"
    proc = _start(mini_data, ws, (LONG_BOOK,))
    _kill_a_busy_worker(proc)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "BrokenProcessPool" not in out
    report = json.loads((ws / "prepare_report.json").read_text())["report"]
    assert sorted(report["done"]) == sorted([DYING_DETECTIVE, *SHORT_BOOKS, LONG_BOOK]) and not report["failed"]


def test_workers_die_with_their_parent(mini_data, tmp_path):
    proc = _start(mini_data, tmp_path / "ws")
    workers = _wait_for_workers(proc, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + 60
    while time.monotonic() < end and any(_alive(w) for w in workers):
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers)


def test_ctrl_c_stops_with_one_line_and_keeps_finished_books(mini_data, shared_data, tmp_path):
    _add_long_book(mini_data, shared_data)
    ws = tmp_path / "ws"
    proc = _start(mini_data, ws, (LONG_BOOK,))
    _wait_for_workers(proc, 2)
    end = time.monotonic() + 300
    while time.monotonic() < end and not any((ws / "books").glob("*/*.book")):  # one book finished
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in out and "Traceback" not in out, out
    report = json.loads((ws / "prepare_report.json").read_text())["report"]
    assert len(report["done"]) >= 1 and all((ws / "books" / b).is_dir() for b in report["done"])


def test_a_full_or_read_only_disk_is_one_line_and_leaves_no_temporary_file(dd_ws, tmp_path, monkeypatch):
    """ENOSPC while a new book's files are written, EROFS on the workspace: one line naming the path and what to do
    (no traceback), no book half-made, no temporary file left."""
    import errno
    import os
    from typer.testing import CliRunner
    from cli import app
    from whoqa.core import files as book_mod  # (where atomic_write lives: its os and tempfile are patched)
    story = tmp_path / "story.txt"
    story.write_text("Anna met Tom at the mill. Tom told Anna of the storm, and Anna warned the miller John.\n" * 4)
    real = os.fdopen

    def full(fd, *a, **k):
        f = real(fd, *a, **k)
        f.write = lambda *_: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device", f.name))
        return f
    books = sorted(p.name for p in (dd_ws / "books").iterdir())
    for err, fake, words in ((errno.ENOSPC, full, "free some space"), (errno.EROFS, None, "read-only")):
        if fake:
            monkeypatch.setattr(book_mod.os, "fdopen", fake)
        else:
            monkeypatch.setattr(book_mod.tempfile, "mkstemp", lambda **k: (_ for _ in ()).throw(
                OSError(errno.EROFS, "Read-only file system", str(k.get("dir")))))
        r = CliRunner().invoke(app, ["ask", "--workspace", str(dd_ws), "--text", str(story), "Who met Tom?",
                                     "--llm", "none"])
        lines = [l for l in r.output.splitlines() if l.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and words in lines[0] and "Traceback" not in r.output, r.output
        monkeypatch.undo()
        assert sorted(p.name for p in (dd_ws / "books").iterdir()) == books  # nothing half-made
        assert not [p for p in dd_ws.rglob("*.tmp")]
