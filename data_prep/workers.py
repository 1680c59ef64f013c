"""Where `prepare`'s books are made: one engine per worker process (`init_worker`), a book processed into its folder
(`process_book`, `process_text`), the pool that survives a dying worker (`pooled`), and Ray tasks (`on_ray`)."""
from __future__ import annotations

import logging
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from data_prep.config import PrepareConfig
from data_prep.engines import engine_identity, engine_parts, make_engine
from data_prep.narrativeqa import NarrativeQA
from whoqa.core.book import write_book_files
from whoqa.core.executor import ExecutorConfig
from whoqa.core.files import atomic_write
from whoqa.core.jobs import die_with_parent
from whoqa.core.store import SOURCE_FILE, write_source

log = logging.getLogger(__name__)


_engine = None
_identity: dict | None = None


def init_worker(cfg: PrepareConfig, parts: tuple | None = None, identity: dict | None = None) -> None:
    """A worker's engine, made once: from the registry entries and identity the parent looked up when given."""
    global _engine, _identity
    logging.basicConfig(level=logging.WARNING)
    if mp_child():
        die_with_parent()
    _engine, _identity = make_engine(cfg, parts), identity or engine_identity(cfg)


def mp_child() -> bool:
    import multiprocessing as mp
    return mp.parent_process() is not None


def process_book(data: NarrativeQA, book_id: str, out_dir: Path, engine, documents=None,
                 identity: dict | None = None) -> dict:
    """Process one book into out_dir/<id>/; returns its stats. `identity` (engine_identity) is recorded with it."""
    t0 = time.perf_counter()
    text, source = data.book_source(book_id, documents)
    if not text.strip():
        raise ValueError(f"book {book_id} is empty after removing the Gutenberg header and licence")
    if identity is not None:
        source = {**source, "made_by": identity}
    write_source(Path(out_dir) / book_id, source)  # before the book files: it is done after
    stats = process_text(text, book_id, out_dir, engine)
    stats.update(source)
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return stats


def process_text(text: str, book_id: str, out_dir: Path, engine, progress=None) -> dict:
    """A story's text -> out_dir/<id>/ in BookNLP's formats; returns its stats. `progress(n)`: told of each n tokens
    parsed (the engines that parse here)."""
    folder = Path(out_dir) / book_id
    if engine.writes_files:
        stats = engine.process_file(text, book_id, folder)
    else:
        out = engine.process_text(text, progress=progress) if progress else engine.process_text(text)
        write_book_files(folder, book_id, out.token_rows, out.entity_rows, out.book)
        stats = out.stats
    stats.setdefault("words", len(text.split()))
    return stats


def work_book(data_root: str, book_id: str, out_dir: str) -> tuple[str, dict | None, str | None]:
    try:
        return book_id, process_book(NarrativeQA(data_root), book_id, Path(out_dir), _engine, identity=_identity), None
    except Exception as e:  # reported per book; the other books go on
        return book_id, None, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"


BOOK_FILES = (SOURCE_FILE, ".tokens", ".entities", ".book")  # the order they are written: .book marks a finished book


def _ray_work(data_root: str, book_id: str) -> tuple[str, dict | None, str | None, dict[str, bytes]]:
    """A book processed on a Ray worker into a folder of its own, returned as its files' bytes (the driver writes
    them into the workspace)."""
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="whoqa-")
    try:
        b, stats, err = work_book(data_root, book_id, tmp)
        folder = Path(tmp) / book_id
        files = {p.name: p.read_bytes() for p in folder.iterdir()} if err is None else {}
        return b, stats, err, files
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def on_ray(cfg: PrepareConfig, data_root: str, todo: list[str], out_dir: Path):
    """(book, stats, error) of each book processed as a Ray task; each book's files are written here, by the driver,
    through the same atomic writes and in the same order as a local worker's."""
    from whoqa.core.executor import ray_map
    ex = ExecutorConfig(executor="ray", ray_address=cfg.ray_address)
    for b, stats, err, *files in ray_map(_ray_work, {b: (data_root, b) for b in todo}, ex,
                                          lambda k, why: (k, None, why), init_worker,
                                          (cfg, engine_parts(cfg), engine_identity(cfg))):
        if err is None:
            got = files[0]
            for suffix in BOOK_FILES:
                name = suffix if suffix == SOURCE_FILE else f"{b}{suffix}"
                if name in got:
                    atomic_write(out_dir / b / name, got[name])
        yield b, stats, err


WORKER_DIED = "its worker process died twice on it (killed, or out of memory)"


def pooled(fn, args: dict[str, tuple], jobs: int, initializer=None, initargs=()):
    """(book id, stats, error) of fn(*args[book]) for every book, in worker processes. A worker that dies (kill -9,
    out of memory) breaks the pool: the books that were in it are retried once in a new pool, then given the reason
    as their error; the others are never lost. Ctrl-C kills the workers at once instead of waiting for their books."""
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool
    deaths = {b: 0 for b in args}
    left = list(args)
    while left:
        broken = []
        pool = ProcessPoolExecutor(min(jobs, len(left)), mp_context=mp.get_context("spawn"),
                                   initializer=initializer or die_with_parent, initargs=initargs)
        try:
            futs = {pool.submit(fn, *args[b]): b for b in left}
            for f in as_completed(futs):
                try:
                    result = f.result()
                except BrokenProcessPool:
                    broken.append(futs[f])
                    continue
                yield result
        except BaseException:
            for proc in list(getattr(pool, "_processes", {}).values()):  # do not wait for books in progress
                proc.kill()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        left = []
        for b in broken:
            deaths[b] += 1
            if deaths[b] >= 2:
                yield b, None, WORKER_DIED
            else:
                log.warning("a worker process died while book %s was in the pool: retrying it", b)
                left.append(b)
