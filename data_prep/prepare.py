"""`whoqa prepare`: raw books -> processed books, in parallel processes, resumable, one bad book never stops the rest.

The engine is data_prep.engines', the worker processes data_prep.workers', what is derived from each book
data_prep.derive's; every artifact is written and read through whoqa.core.store."""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from data_prep.config import PrepareConfig
from data_prep.derive import derive
from data_prep.engines import engine_identity, engine_parts, make_engine, record_engine
from data_prep.narrativeqa import DataError, NarrativeQA, file_sha1
from data_prep.workers import init_worker, on_ray, pooled, work_book
from whoqa.core.book import is_done
from whoqa.core.executor import ExecutorConfig
from whoqa.core.progress import bar as progress_bar
from whoqa.core.seed import fixed_hash_seed_env, hash_seed_fixed
from whoqa.core.store import (forget_derived, read_source, recorded_data, write_data_record,
                              write_prepare_report)
from whoqa.core.workspace import Workspace, locked

log = logging.getLogger(__name__)


@dataclass
class PrepareReport:
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already processed
    failed: dict[str, str] = field(default_factory=dict)
    redone_text_changed: list[str] = field(default_factory=list)  # prepared before from another text
    redone_engine_changed: list[str] = field(default_factory=list)  # prepared before by another engine or weights
    words: int = 0
    seconds: float = 0.0
    per_book: dict[str, dict] = field(default_factory=dict)
    who_set: dict = field(default_factory=dict)  # kept/dropped counts of the Who set
    artificial: dict = field(default_factory=dict)  # generated/skipped counts of artificial questions
    embeddings: dict = field(default_factory=dict)  # word2vec corpus and training figures

    def summary(self, workspace) -> tuple[list[str], list[str]]:
        """(lines, warnings) that `whoqa prepare` prints: what was made, then what the user should look at."""
        from data_prep.who_set import DROP_NO_ALIAS, DROP_NO_BOOK, DROP_NOT_CHARACTER
        wps = self.words / self.seconds if self.seconds else 0
        lines = [f"prepared {len(self.done)} book(s), {len(self.skipped)} already done, {len(self.failed)} failed; "
                 f"{self.words:,} words in {self.seconds:.1f}s ({wps:,.0f} words/s) -> {workspace}/books"]
        warnings = []
        if self.who_set:
            w = self.who_set
            lines.append(f"Who set: kept {w.get('kept', 0)} of {w.get('who_questions', 0)} Who questions -> "
                         f"{workspace}/who (dropped: {w.get(DROP_NOT_CHARACTER, 0)} answer not a character, "
                         f"{w.get(DROP_NO_ALIAS, 0)} no alias match, {w.get(DROP_NO_BOOK, 0)} book not prepared)")
        if self.artificial:
            a = self.artificial
            lines.append(f"artificial questions: {a['totals'].get('questions', 0):,} from {a['books']} books -> "
                         f"{workspace}/artificial ({a['questions_per_second'] or '-'} questions/s this run)")
        if self.embeddings:
            e = self.embeddings
            if e["mode"] == "trained":
                lines.append(f"word2vec: {e['vocab']:,} tokens ({e['characters']:,} characters) from {e['tokens']:,} "
                             f"words in {e['train_seconds']}s -> {workspace}/embeddings")
            else:
                lines.append(f"word2vec: {e['books']} book(s) folded in, {e['new_rows']:,} new tokens, {e['rows']:,} "
                             f"in all (existing vectors unchanged) -> {workspace}/embeddings")
            if e.get("stale_models"):
                warnings.append(f"rebuilt word vectors: these models are now stale, retrain them: "
                                f"{', '.join(e['stale_models'])}")
        if self.redone_text_changed:
            warnings.append(f"redone {len(self.redone_text_changed)} book(s) whose text changed since they were "
                            f"prepared")
        if self.redone_engine_changed:
            warnings.append(f"redone {len(self.redone_engine_changed)} book(s) prepared by another engine or "
                            f"coreference weights")
        warnings += [f"  failed {b}: {err.splitlines()[0]}" for b, err in self.failed.items()]
        return lines, warnings


def books_dir(workspace: str | Path) -> Path:
    return Workspace(workspace).books


def source_for(workspace: str | Path, data: str | Path | None, books: list[str], default: str) \
        -> tuple[str, list[str]]:
    """(data folder, books) `prepare` takes: --data (and --book) as given; else the folder (and the books chosen)
    the workspace recorded; `default` only for a workspace that holds no book yet. A workspace of books whose folder
    was never recorded is refused with one line, rather than given the default folder's other books."""
    if data is not None:
        return str(data), list(books)
    rec = recorded_data(workspace)
    if rec is not None:
        return rec["data"], list(books) or list(rec.get("books") or [])
    folder = Workspace(workspace).books
    if folder.is_dir() and any(p.is_dir() for p in folder.iterdir()):
        raise ValueError(f"workspace {workspace} holds books but no record of the folder they came from: pass "
                         f"--data DIR (the NarrativeQA folder they were prepared from)")
    return default, list(books)


def prepare(cfg: PrepareConfig, progress: bool = True) -> PrepareReport:
    """Under the workspace lock: two runs on one workspace take turns and never drop each other's books."""
    data = NarrativeQA(cfg.data)
    with locked(cfg.workspace):
        return _prepare(cfg, data, progress)


def _prepare(cfg: PrepareConfig, data: NarrativeQA, progress: bool) -> PrepareReport:
    out_dir = books_dir(cfg.workspace)
    out_dir.mkdir(parents=True, exist_ok=True)
    data.csv_path("documents.csv")  # fail fast, naming the folder, before any engine loads
    available = data.book_ids(unlabeled=cfg.unlabeled or bool(cfg.books))
    if not available:
        raise DataError(f"no books in {data.root}/books" + ("-unlabeled" if cfg.unlabeled else "")
                        + ": put <document_id>.txt files there (or run `whoqa download --data {data.root}`)")
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
    identity = engine_identity(cfg)  # (fails here, before any engine loads, on a missing weights file)
    record_engine(cfg, identity)
    if cfg.who_set:  # a whole `prepare` (not one book of another folder added by `ask --data` or `eval --data`)
        write_data_record(cfg.workspace, cfg.data, cfg.books, cfg.unlabeled)
    ExecutorConfig(cfg.executor).check()  # (before any book is processed)
    todo = []
    for b in ids:
        done = is_done(out_dir / b, b)
        if done and text_changed(out_dir / b, data.book_path(b)):
            log.warning("book %s: its text changed since it was prepared: redone (its word vectors keep their rows "
                        "until `whoqa prepare --rebuild-vectors`)", b)
            forget_derived(Path(cfg.workspace), b)
            report.redone_text_changed.append(b)
            done = False
        elif done and made_otherwise(out_dir / b, identity):
            log.warning("book %s: prepared by another engine or coreference weights than %s: redone", b, identity)
            forget_derived(Path(cfg.workspace), b)
            report.redone_engine_changed.append(b)
            done = False
        (report.skipped if done else todo).append(b)
    t0 = time.perf_counter()
    if todo:
        if cfg.engine == "booknlp":
            make_engine(cfg).check()  # fail fast, with the install hint, before any worker starts
        bar = progress_bar(total=len(todo), desc="prepare", unit="book", progress=progress)
        jobs = max(1, min(cfg.jobs, len(todo)))
        side_by_side = jobs > 1 or cfg.executor == "ray"  # books already fill the cores: auto parses each in one
        book_cfg = replace(cfg, parse_processes=1) if side_by_side and not cfg.parse_processes else cfg
        try:
            if cfg.executor == "ray":
                _collect(on_ray(book_cfg, str(data.root), todo, out_dir), report, bar)
            elif jobs == 1 and hash_seed_fixed():
                init_worker(book_cfg)
                results = (work_book(str(data.root), b, str(out_dir)) for b in todo)
                _collect(results, report, bar)
            else:  # (a Python API caller with random string hashing: its books are made in children, fixed)
                with fixed_hash_seed_env():
                    _collect(pooled(work_book, {b: (str(data.root), b, str(out_dir)) for b in todo}, jobs, init_worker,
                                    (book_cfg, engine_parts(cfg), identity)), report, bar)
        except KeyboardInterrupt:
            report.seconds = round(time.perf_counter() - t0, 2)
            report.failed.update({b: "interrupted" for b in todo if b not in report.done and b not in report.failed})
            _write_report(cfg, report)
            raise Interrupted(f"interrupted: {len(report.done)} book(s) finished and kept; run the same command "
                              f"to go on") from None
        bar.close()
    report.seconds = round(time.perf_counter() - t0, 2)
    ready = [b for b in ids if is_done(out_dir / b, b)]
    if cfg.artificial or cfg.embeddings:
        report.artificial = derive(Path(cfg.workspace), ready, cfg.jobs, progress)
    if cfg.embeddings and ready:
        from data_prep.embeddings import update
        report.embeddings = update(Path(cfg.workspace), rebuild=cfg.rebuild_vectors)
    if cfg.who_set:
        from data_prep.who_set import build_who_set
        try:
            data.csv_path("qaps.csv")
        except Exception:
            log.warning("no qaps.csv in %s: no Who set built", data.root)
        else:
            report.who_set = build_who_set(data, Path(cfg.workspace))["totals"]
    _write_report(cfg, report)
    return report


def _write_report(cfg: PrepareConfig, report: PrepareReport) -> None:
    write_prepare_report(cfg.workspace, asdict(cfg), asdict(report))


class Interrupted(Exception):
    """Ctrl-C: finished books are kept and the report written; the message says how to go on."""


def text_changed(folder: Path, path: Path | None) -> bool:
    """True when the book's file is not the one it was prepared from (books prepared before hashes were kept: False)."""
    source = read_source(folder) if path is not None else None
    return source is not None and source.get("sha1") != file_sha1(path)


def made_otherwise(folder: Path, identity: dict) -> bool:
    """True when the book was prepared by another engine or coreference weights (books prepared before this was
    recorded, or by `ask --text`: False)."""
    saved = (read_source(folder) or {}).get("made_by")
    return saved is not None and saved != identity


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
