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

from whoqa.core.artifacts import checksum_file, read_cache, read_record
from whoqa.core.executor import ExecutorConfig
from whoqa.core.jobs import default_jobs
from whoqa.core.progress import bar as progress_bar
from whoqa.core.book import is_done, write_book_files
from whoqa.core.files import atomic_write
from whoqa.core.seed import fixed_hash_seed_env, hash_seed_fixed
from whoqa.core.workspace import locked
from data_prep import components
from data_prep.narrativeqa import DataError, NarrativeQA, file_sha1
from whoqa.core.workspace import Workspace

log = logging.getLogger(__name__)
SOURCE_FILE = "source.json"  # per prepared book: {"sha1" of its file, "encoding"}


@dataclass
class PrepareConfig:
    data: str
    workspace: str
    books: list[str] = field(default_factory=list)  # empty: every book of books/ (and books-unlabeled/ if unlabeled)
    engine: str = "spacy"  # a name of data_prep.components.ENGINES
    resolver: str = "rules"  # the spacy engine's pronoun resolver: a name of data_prep.components.RESOLVERS
    jobs: int = field(default_factory=default_jobs)  # books processed in parallel processes
    unlabeled: bool = True  # also books-unlabeled/ (artificial questions and word vectors only)
    booknlp_python: str | None = None  # BookNLP engine: the Python of an environment with booknlp + transformers<=4.30
    booknlp_models: str | None = None  # BookNLP engine: folder of its model files (default ~/booknlp_models)
    max_books: int | None = None  # debug knob: only the first N books
    coref_weights: str | None = None  # spaCy engine: a `whoqa train-coref` weights file (None: the hand-set rules)
    who_set: bool = True  # build WS/who/ from qaps.csv once the books are done
    artificial: bool = True  # artificial Who questions per book under WS/artificial/
    embeddings: bool = True  # word2vec over all books' mention-replaced text under WS/embeddings/
    rebuild_vectors: bool = False  # train the vectors from scratch (else new books are folded in); stales models
    executor: str = "local"  # local (a process pool of `jobs`) | ray (a Ray cluster: whoqa.core.executor)
    ray_address: str | None = None  # with executor ray: auto, HOST:PORT (None: $RAY_ADDRESS, else auto)


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


def engine_identity(cfg: PrepareConfig) -> dict:
    """What a prepared book was made by, recorded beside it (SOURCE_FILE): a book made otherwise is redone."""
    weights = None
    if cfg.coref_weights:
        if cfg.engine != "spacy":
            raise ValueError(f"--coref-weights is for the spacy engine's resolver, not {cfg.engine!r}")
        if not Path(cfg.coref_weights).is_file():
            raise DataError(f"coreference weights {cfg.coref_weights} not found: write them with `whoqa train-coref`")
        weights = file_sha1(Path(cfg.coref_weights))
    if cfg.resolver != components.DEFAULT_RESOLVER and cfg.engine != "spacy":
        raise ValueError(f"--resolver is the spacy engine's pronoun resolver; {cfg.engine!r} resolves its own")
    return {**components.identity(cfg.engine, cfg.resolver), "coref_weights": weights}


ENGINE_FIELDS = ("engine", "coref_weights", "booknlp_python", "booknlp_models", "resolver")


def record_engine(cfg: PrepareConfig, identity: dict) -> None:
    """Keep how this workspace's books are made (WS/engine.json), so a book added later (`ask --text`, an upload,
    `eval --data`) is made the same way."""
    rec = {**{f: getattr(cfg, f) for f in ENGINE_FIELDS}, "identity": identity}
    if rec["resolver"] == components.DEFAULT_RESOLVER:
        del rec["resolver"]  # (the record of a default workspace stays byte for byte as before the registry)
    if rec["coref_weights"]:
        rec["coref_weights"] = str(Path(rec["coref_weights"]).resolve())
    path = Workspace(cfg.workspace).engine_record
    if read_cache(path) != rec:  # none yet, another, or a damaged one: written again
        atomic_write(path, json.dumps(rec, indent=1))


def record_data(cfg: PrepareConfig) -> None:
    """Keep where this workspace's books come from (WS/data.json): the folder as an absolute path, the books chosen
    (--book, accumulated over runs; None once a run took them all) and whether books-unlabeled/ was taken, so
    `prepare` without --data, and the commands `whoqa check` prints, take the same books again, never another's."""
    path = Workspace(cfg.workspace).data_record
    old = read_cache(path, dict) or {}
    data = str(Path(cfg.data).resolve())
    books = None
    if cfg.books and old.get("data") == data and isinstance(old.get("books"), list):
        books = sorted({*old["books"], *cfg.books})
    elif cfg.books and old.get("data") != data:
        books = sorted(cfg.books)
    rec = {"data": data, "books": books, "unlabeled": bool(cfg.unlabeled or old.get("unlabeled"))}
    if old != rec:
        atomic_write(path, json.dumps(rec, indent=1))


def recorded_data(workspace: str | Path) -> dict | None:
    """{"data", "books", "unlabeled"} as the workspace's `prepare` recorded them; for a workspace prepared before the
    record, its last report's where that named an absolute folder (a relative one depended on where it ran); else
    None."""
    ws = Workspace(workspace)
    rec = read_record(ws.data_record, f"delete it and run `whoqa prepare --workspace {workspace} --data DIR` (the "
                                      f"folder its books came from)")
    if rec and isinstance(rec.get("data"), str):
        return {"data": rec["data"], "books": rec.get("books"), "unlabeled": rec.get("unlabeled", True)}
    cfg = (read_cache(ws.prepare_report, dict) or {}).get("config") or {}
    if isinstance(cfg.get("data"), str) and Path(cfg["data"]).is_absolute():
        return {"data": cfg["data"], "books": cfg.get("books") or None, "unlabeled": cfg.get("unlabeled", True)}
    return None


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


def recorded_engine(workspace: Path) -> tuple[object, dict | None]:
    """(engine, identity) as the workspace's `prepare` recorded them; the default spaCy engine and no identity for a
    workspace prepared before this was kept (or never prepared). A recorded weights file that is gone or changed is
    a one-line error: the book would be made otherwise than its workspace."""
    from whoqa.core.artifacts import read_json
    path = Workspace(workspace).engine_record
    if not path.is_file():
        return make_engine(PrepareConfig(data="", workspace=str(workspace))), None
    rec = read_json(path, f"run `whoqa prepare --workspace {workspace}` again to record its engine", dict)
    cfg = PrepareConfig(data="", workspace=str(workspace), **{f: rec.get(f) for f in ENGINE_FIELDS if rec.get(f)})
    identity = engine_identity(cfg)
    if rec.get("identity") and identity != rec["identity"]:
        raise DataError(f"{cfg.coref_weights} changed since this workspace's books were made with it: put the "
                        f"original back or run `whoqa prepare --coref-weights FILE` again")
    return make_engine(cfg), identity


def make_engine(cfg: PrepareConfig, parts: tuple | None = None):
    """The engine the config names (data_prep.components.ENGINES), with its resolver. `parts`: (engine entry,
    resolver entry) looked up by the parent process (`engine_parts`), so a worker process makes the engine of an
    entry registered at run time too (a plugin, a test's toy) without the registry being filled in it."""
    engine, resolver = parts or engine_parts(cfg)
    return engine.make(cfg, resolver)


def engine_parts(cfg: PrepareConfig) -> tuple:
    return components.engine(cfg.engine), components.resolver(cfg.resolver, for_prepare=True)


_engine = None
_identity: dict | None = None


def _init_worker(cfg: PrepareConfig, parts: tuple | None = None, identity: dict | None = None) -> None:
    """A worker's engine, made once: from the registry entries and identity the parent looked up when given."""
    global _engine, _identity
    logging.basicConfig(level=logging.WARNING)
    if mp_child():
        _die_with_parent()
    _engine, _identity = make_engine(cfg, parts), identity or engine_identity(cfg)


def mp_child() -> bool:
    import multiprocessing as mp
    return mp.parent_process() is not None


def _die_with_parent() -> None:
    """A worker never outlives the whoqa process (Linux: PR_SET_PDEATHSIG), and leaves Ctrl-C to the parent."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: workers end when they next hear from the parent
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def process_book(data: NarrativeQA, book_id: str, out_dir: Path, engine, documents=None,
                 identity: dict | None = None) -> dict:
    """Process one book into out_dir/<id>/; returns its stats. `identity` (engine_identity) is recorded with it."""
    t0 = time.perf_counter()
    text, source = data.book_source(book_id, documents)
    if not text.strip():
        raise ValueError(f"book {book_id} is empty after removing the Gutenberg header and licence")
    if identity is not None:
        source = {**source, "made_by": identity}
    atomic_write(Path(out_dir) / book_id / SOURCE_FILE, json.dumps(source))  # before the book files: it is done after
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


def _work(data_root: str, book_id: str, out_dir: str) -> tuple[str, dict | None, str | None]:
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
        b, stats, err = _work(data_root, book_id, tmp)
        folder = Path(tmp) / book_id
        files = {p.name: p.read_bytes() for p in folder.iterdir()} if err is None else {}
        return b, stats, err, files
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _on_ray(cfg: PrepareConfig, data_root: str, todo: list[str], out_dir: Path):
    """(book, stats, error) of each book processed as a Ray task; each book's files are written here, by the driver,
    through the same atomic writes and in the same order as a local worker's."""
    from whoqa.core.executor import ray_map
    ex = ExecutorConfig(executor="ray", ray_address=cfg.ray_address)
    for b, stats, err, *files in ray_map(_ray_work, {b: (data_root, b) for b in todo}, ex,
                                          lambda k, why: (k, None, why), _init_worker,
                                          (cfg, engine_parts(cfg), engine_identity(cfg))):
        if err is None:
            got = files[0]
            for suffix in BOOK_FILES:
                name = suffix if suffix == SOURCE_FILE else f"{b}{suffix}"
                if name in got:
                    atomic_write(out_dir / b / name, got[name])
        yield b, stats, err


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
        record_data(cfg)
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
        try:
            if cfg.executor == "ray":
                _collect(_on_ray(cfg, str(data.root), todo, out_dir), report, bar)
            elif jobs == 1 and hash_seed_fixed():
                _init_worker(cfg)
                results = (_work(str(data.root), b, str(out_dir)) for b in todo)
                _collect(results, report, bar)
            else:  # (a Python API caller with random string hashing: its books are made in children, fixed)
                with fixed_hash_seed_env():
                    _collect(pooled(_work, {b: (str(data.root), b, str(out_dir)) for b in todo}, jobs, _init_worker,
                                    (cfg, engine_parts(cfg), identity)), report, bar)
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
    atomic_write(Workspace(cfg.workspace).prepare_report,
                 json.dumps({"config": asdict(cfg), "report": asdict(report)}, indent=1))


class Interrupted(Exception):
    """Ctrl-C: finished books are kept and the report written; the message says how to go on."""


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
                                   initializer=initializer or _die_with_parent, initargs=initargs)
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


def _recorded(folder: Path) -> dict | None:
    """A prepared book's SOURCE_FILE (None for books prepared before it was kept)."""
    src = Path(folder) / SOURCE_FILE
    return read_record(src, "delete it; `whoqa prepare` records the book's source again")


def text_changed(folder: Path, path: Path | None) -> bool:
    """True when the book's file is not the one it was prepared from (books prepared before hashes were kept: False)."""
    source = _recorded(folder) if path is not None else None
    return source is not None and source.get("sha1") != file_sha1(path)


def made_otherwise(folder: Path, identity: dict) -> bool:
    """True when the book was prepared by another engine or coreference weights (books prepared before this was
    recorded, or by `ask --text`: False)."""
    saved = (_recorded(folder) or {}).get("made_by")
    return saved is not None and saved != identity


def forget_derived(workspace: Path, book_id: str) -> None:
    """Remove what later stages made of a book (the workspace names them: `Workspace.derived_from_book`), and the
    book itself, so its new text is not judged by its old artifacts."""
    import shutil
    ws = Workspace(workspace)
    for p in [*ws.derived_from_book(book_id), ws.book(book_id)]:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
            checksum_file(p).unlink(missing_ok=True)


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


def _derive_work(workspace: str, book_id: str) -> tuple[str, dict | None, str | None]:
    """Artificial questions and the word2vec corpus of one processed book (one read of its saved parses)."""
    from data_prep.artificial import generate, write_questions
    from whoqa.core.book import Book
    from data_prep.embeddings import write_corpus
    ws = Workspace(workspace)
    try:
        t0 = time.perf_counter()
        book = Book.load(ws.books / book_id, book_id)
        qs, stats = generate(book)
        write_corpus(book, ws.corpus)
        write_questions(ws.artificial_questions(book_id), qs)  # last: marks the book derived
        return book_id, {**stats, "seconds": round(time.perf_counter() - t0, 3)}, None
    except Exception as e:
        return book_id, None, f"{type(e).__name__}: {e}"


def derive(workspace: Path, book_ids: list[str], jobs: int = 1, progress: bool = True) -> dict:
    """Per-book derived artifacts, resumable: books whose question file exists are not redone."""
    ws = Workspace(workspace)
    report_path = ws.artificial_report
    old = read_cache(report_path, dict) or {}  # a damaged report: its figures are counted again
    per_book = old.get("per_book", {})
    todo = [b for b in book_ids if not (ws.artificial_questions(b)).is_file()
            or not (ws.corpus_file(b)).is_file()]
    failed = {}
    t0 = time.perf_counter()
    if todo:
        bar = progress_bar(total=len(todo), desc="questions+corpus", unit="book", progress=progress)
        if jobs <= 1 or len(todo) == 1:
            results = (_derive_work(str(workspace), b) for b in todo)
        else:
            results = pooled(_derive_work, {b: (str(workspace), b) for b in todo}, jobs)
        for b, stats, err in results:
            if err is None:
                per_book[b] = stats
            else:
                failed[b] = err
                log.error("artificial questions for %s failed: %s", b, err)
            bar.update(1)
        bar.close()
    seconds = time.perf_counter() - t0
    totals: dict = {}
    for b in book_ids:
        for k, v in per_book.get(b, {}).items():
            if k != "seconds":
                totals[k] = totals.get(k, 0) + v
    done_now = [b for b in todo if b not in failed]
    n_new = sum(per_book[b].get("questions", 0) for b in done_now)
    report = {"totals": totals, "books": len(book_ids), "books_done": len(done_now), "failed": failed,
              "questions_per_second": round(n_new / seconds) if done_now and seconds else None,
              "per_book": per_book}
    atomic_write(report_path, json.dumps(report, indent=1))
    return {k: v for k, v in report.items() if k != "per_book"}
