"""`whoqa index`: each question's ranked 5-sentence windows, from each ranker, under WS/contexts/<ranker>/.

Reads the processed books and WS/questions.json (both written by `whoqa prepare`); cached and resumable per book.
"""
from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from whoqa.core.registry import check_name
from whoqa.core.store import load_questions
from whoqa.core.artifacts import DamagedArtifact, read_record
from whoqa.core.files import atomic_write
from whoqa.core.jobs import default_jobs
from whoqa.retrieval.bm25f import RetrievalConfig, Window, context_sentences
from whoqa.retrieval.report import IndexReport
from whoqa.core.workspace import Workspace
from whoqa.retrieval.bm25f import index_book
import shutil
import tempfile
from whoqa.core.book import SUFFIXES
from whoqa.core.executor import ray_map
from whoqa.retrieval.bert_ranker import RankerConfig
from whoqa.retrieval.bert_ranker import build_bert_contexts
from whoqa.core.progress import bar as progress_bar
import multiprocessing as mp

log = logging.getLogger(__name__)
RANKERS = ("bm25f", "bert")
ORACLE = "oracle"  # BM25F with the question and its answers: an upper bound for the reader, never a Who ranker


def _read_book(workspace: Path, ranker: str, book_id: str) -> dict | None:
    """A book's contexts file (WS/contexts/<ranker>/<id>.json: its config and each question's windows), the one
    reader of it; None when the book has none yet."""
    path = Workspace(workspace).contexts_file(ranker, book_id)
    repair = f"delete it and run `whoqa index --workspace {workspace} --ranker {ranker}`"
    data = read_record(path, repair)
    if data is not None and not isinstance(data.get("questions"), dict):
        raise DamagedArtifact(path, "no \"questions\" record", repair)
    return data


def load_contexts(workspace: Path, ranker: str, book_id: str) -> dict[str, list[Window]] | None:
    """A book's stored contexts: question id -> its windows (read back as Windows)."""
    data = _read_book(workspace, ranker, book_id)
    return None if data is None else {q: [Window(*w) for w in wins] for q, wins in data["questions"].items()}


def contexts_config(workspace: Path, ranker: str, book_id: str) -> dict | None:
    """The config a book's contexts were made with (without the BERT fold), or None when there are none."""
    data = _read_book(workspace, ranker, book_id)
    if data is None:
        return None
    cfg = dict(data.get("config", {}))
    cfg.pop("fold", None)
    return cfg


def contexts_report(workspace: Path, ranker: str) -> dict | None:
    """What `whoqa index` last reported for a ranker's contexts (WS/contexts/<ranker>/report.json: its config)."""
    return read_record(Workspace(workspace).contexts_report(ranker),
                       f"run `whoqa index --workspace {workspace} --ranker {ranker}` again")


def question_context(contexts: dict, question_id: int, limit: int) -> list[int]:
    return context_sentences(contexts.get(str(question_id), []), limit)


def _bm25f_work(workspace: str, book_id: str, questions: list[dict], cfg: RetrievalConfig, oracle: bool = False):
    try:
        t0 = time.perf_counter()
        stats = index_book(Path(workspace), book_id, questions, cfg, oracle)
        return book_id, {**stats, "seconds": round(time.perf_counter() - t0, 2)}, None
    except Exception as e:
        return book_id, None, f"{type(e).__name__}: {e}"


def _ray_bm25f_work(files: dict[str, bytes], book_id: str, questions: list[dict], cfg: RetrievalConfig,
                    oracle: bool):
    """A book's contexts on a Ray worker: its files (sent by the driver) in a workspace of its own, indexed there;
    the contexts file's bytes come back (the Lucene index is a cache: the driver's workspace builds it when asked)."""
    tmp = Path(tempfile.mkdtemp(prefix="whoqa-"))
    try:
        (tmp / "books" / book_id).mkdir(parents=True)
        for name, data in files.items():
            (tmp / "books" / book_id / name).write_bytes(data)
        b, stats, err = _bm25f_work(str(tmp), book_id, questions, cfg, oracle)
        out = Workspace(tmp).contexts / (ORACLE if oracle else "bm25f") / f"{book_id}.json"
        return b, stats, err, out.read_bytes() if err is None else b""
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _on_ray(ws: Workspace, todo: dict, cfg: RetrievalConfig, ranker: str, executor):
    """(book, stats, error) of each book's contexts made as a Ray task, written here by the driver."""
    args = {b: ({f"{b}{s}": ws.book_file(b, s).read_bytes() for s in SUFFIXES}, b, qs, cfg, ranker == ORACLE)
            for b, qs in todo.items()}
    for b, stats, err, *data in ray_map(_ray_bm25f_work, args, executor, lambda k, why: (k, None, why)):
        if err is None:
            atomic_write(ws.contexts_file(ranker, b), data[0])
        yield b, stats, err


def build_contexts(workspace: Path, ranker: str = "bm25f", jobs: int | None = None, cfg: RetrievalConfig | None = None,
                   progress: bool = True, ranker_cfg=None, device: str = "auto", executor=None) -> IndexReport:
    """Contexts of every question of every prepared book for one ranker; books already done are skipped.
    `executor` (whoqa.core.executor.ExecutorConfig): on a Ray cluster instead of this machine's processes (BM25F)."""
    check_name("ranker", ranker, RANKERS + (ORACLE,))
    ws = Workspace(workspace)
    cfg = cfg or RetrievalConfig()
    by_book = load_questions(ws)
    want = asdict(cfg)
    if ranker == "bert":
        want = {**want, "ranker": asdict(ranker_cfg or RankerConfig())}
    made = {b: contexts_config(ws, ranker, b) for b in by_book}
    todo = {b: qs for b, qs in by_book.items() if made[b] != want}
    redone = sorted(b for b in todo if made[b] is not None)
    if redone:
        log.warning("%s contexts of %d book(s) were made with another config: redone", ranker, len(redone))
    report = IndexReport(ranker, len(by_book), skipped=len(by_book) - len(todo), redone_config_changed=len(redone),
                         config=asdict(cfg))
    if ranker == "bert":
        return build_bert_contexts(ws, todo, cfg, report, progress, ranker_cfg, device)
    bar = progress_bar(total=len(todo), desc=f"index {ranker}", unit="book", progress=progress)
    t0 = time.perf_counter()
    jobs = jobs or default_jobs()
    if executor is not None and executor.executor == "ray":
        _collect(_on_ray(ws, todo, cfg, ranker, executor.check()), report, bar)
    elif jobs <= 1 or len(todo) <= 1:
        results = (_bm25f_work(str(ws), b, qs, cfg, ranker == ORACLE) for b, qs in todo.items())
        _collect(results, report, bar)
    else:
        with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=mp.get_context("spawn")) as pool:
            futs = [pool.submit(_bm25f_work, str(ws), b, qs, cfg, ranker == ORACLE) for b, qs in todo.items()]
            _collect((f.result() for f in as_completed(futs)), report, bar)
    bar.close()
    report.done.sort()  # in book order, not the order parallel workers finished in: the same report every run
    report.seconds = round(time.perf_counter() - t0, 1)
    atomic_write(ws.contexts_report(ranker), json.dumps(report.to_json(), indent=1))
    return report


def _collect(results, report: IndexReport, bar) -> None:
    for b, stats, err in results:
        if err is None:
            report.done.append(b)
        else:
            report.failed[b] = err
            log.error("contexts for %s failed: %s", b, err)
        bar.update(1)
