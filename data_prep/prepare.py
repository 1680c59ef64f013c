"""`whoqa prepare`: raw books -> processed books, in parallel processes, resumable, one bad book never stops the rest."""
from __future__ import annotations

import json
import logging
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from whoqa.book import atomic_write, is_done, write_book_files
from data_prep.narrativeqa import NarrativeQA

log = logging.getLogger(__name__)


@dataclass
class PrepareConfig:
    data: str
    workspace: str
    books: list[str] = field(default_factory=list)  # empty: every book of books/ (and books-unlabeled/ if unlabeled)
    engine: str = "spacy"  # spacy | booknlp
    jobs: int = 1
    unlabeled: bool = False
    booknlp_python: str | None = None  # BookNLP engine: the Python of an environment with booknlp + transformers<=4.30
    booknlp_models: str | None = None  # BookNLP engine: folder of its model files (default ~/booknlp_models)
    max_books: int | None = None  # debug knob: only the first N books
    who_set: bool = True  # build WS/who/ from qaps.csv once the books are done


@dataclass
class PrepareReport:
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already processed
    failed: dict[str, str] = field(default_factory=dict)
    words: int = 0
    seconds: float = 0.0
    per_book: dict[str, dict] = field(default_factory=dict)
    who_set: dict = field(default_factory=dict)  # kept/dropped counts of the Who set


def books_dir(workspace: str | Path) -> Path:
    return Path(workspace) / "books"


def make_engine(cfg: PrepareConfig):
    if cfg.engine == "spacy":
        from data_prep.engine_spacy import SpacyEngine
        return SpacyEngine()
    if cfg.engine == "booknlp":
        from data_prep.engine_booknlp import BookNLPEngine
        return BookNLPEngine(python=cfg.booknlp_python, models=cfg.booknlp_models)
    raise ValueError(f"unknown engine {cfg.engine!r}: use spacy or booknlp")


_engine = None


def _init_worker(cfg: PrepareConfig) -> None:
    global _engine
    logging.basicConfig(level=logging.WARNING)
    _engine = make_engine(cfg)


def process_book(data: NarrativeQA, book_id: str, out_dir: Path, engine, documents=None) -> dict:
    """Process one book into out_dir/<id>/; returns its stats."""
    t0 = time.perf_counter()
    text = data.book_text(book_id, documents)
    if not text.strip():
        raise ValueError(f"book {book_id} is empty after removing the Gutenberg header and licence")
    folder = out_dir / book_id
    if getattr(engine, "writes_files", False):
        stats = engine.process_file(text, book_id, folder)
    else:
        out = engine.process_text(text)
        write_book_files(folder, book_id, out.token_rows, out.entity_rows, out.book)
        stats = out.stats
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    stats.setdefault("words", len(text.split()))
    return stats


def _work(data_root: str, book_id: str, out_dir: str) -> tuple[str, dict | None, str | None]:
    try:
        return book_id, process_book(NarrativeQA(data_root), book_id, Path(out_dir), _engine), None
    except Exception as e:  # reported per book; the other books go on
        return book_id, None, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"


def prepare(cfg: PrepareConfig, progress: bool = True) -> PrepareReport:
    data = NarrativeQA(cfg.data)
    out_dir = books_dir(cfg.workspace)
    out_dir.mkdir(parents=True, exist_ok=True)
    available = data.book_ids(unlabeled=cfg.unlabeled or bool(cfg.books))
    if cfg.books:
        unknown = [b for b in cfg.books if b not in available]
        if unknown:
            raise ValueError(f"book(s) {unknown} not found under {data.root}/books or books-unlabeled")
        ids = list(cfg.books)
    else:
        ids = available
    if cfg.max_books is not None:
        ids = ids[:cfg.max_books]
    report = PrepareReport()
    todo = []
    for b in ids:
        (report.skipped if is_done(out_dir / b, b) else todo).append(b)
    t0 = time.perf_counter()
    if todo:
        if cfg.engine == "booknlp":
            make_engine(cfg).check()  # fail fast, with the install hint, before any worker starts
        bar = _bar(len(todo), progress)
        jobs = max(1, min(cfg.jobs, len(todo)))
        if jobs == 1:
            _init_worker(cfg)
            results = (_work(str(data.root), b, str(out_dir)) for b in todo)
            _collect(results, report, bar)
        else:
            import multiprocessing as mp
            with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                     initargs=(cfg,)) as pool:
                futs = [pool.submit(_work, str(data.root), b, str(out_dir)) for b in todo]
                _collect((f.result() for f in as_completed(futs)), report, bar)
        bar.close()
    report.seconds = round(time.perf_counter() - t0, 2)
    if cfg.who_set:
        from data_prep.who_set import build_who_set
        try:
            data.csv_path("qaps.csv")
        except Exception:
            log.warning("no qaps.csv in %s: no Who set built", data.root)
        else:
            report.who_set = build_who_set(data, Path(cfg.workspace))["totals"]
    atomic_write(Path(cfg.workspace) / "prepare_report.json",
                 json.dumps({"config": asdict(cfg), "report": asdict(report)}, indent=1))
    return report


def _collect(results, report: PrepareReport, bar) -> None:
    for book_id, stats, err in results:
        if err is None:
            report.done.append(book_id)
            report.per_book[book_id] = stats
            report.words += stats.get("words", 0)
        else:
            report.failed[book_id] = err
            log.error("book %s failed: %s", book_id, err.splitlines()[0])
        bar.set_postfix(done=len(report.done), failed=len(report.failed))
        bar.update(1)


def _bar(total: int, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc="prepare", unit="book", disable=not enabled or os.environ.get("WHOQA_NO_PROGRESS") == "1")
