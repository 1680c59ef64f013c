"""The workspace folder: its layout (`Workspace`, every path a stage reads or writes, named once) and one lock, so two
commands that add books (prepare, ask --text, eval --data) never lose each other's work."""
from __future__ import annotations

import fcntl
import logging
import os
from contextlib import contextmanager
from pathlib import Path

_PathBase = type(Path())  # PosixPath or WindowsPath: pathlib is subclassed through the concrete class before 3.12

log = logging.getLogger(__name__)
_held: dict[str, int] = {}  # workspace -> depth of nested `locked` in this process (flock is not re-entrant)
_read_only: set[str] = set()  # workspaces this process only reads (`whoqa serve --read-only`)


def serve_read_only(workspace: str | Path) -> None:
    """Mark a workspace read-only for this process: its caches (a book's index, memory arrays, adapted rows, page
    summaries) are then computed in memory or refused with one line, never written."""
    _read_only.add(str(Path(workspace).resolve()))


class ReadOnly(FileNotFoundError):
    """Something a read-only workspace lacks and cannot be given here; the message says which command makes it."""


class WorkspaceError(ValueError):
    """The workspace path cannot be used; the message says why and what to do."""


class MissingStage(FileNotFoundError):
    """An earlier stage's artifacts are missing; the message says which command to run."""


class Part:
    """A fixed part of the workspace's layout: `ws.books` is Path(ws, "books"). The layout is a table, read at a
    glance, not a method per folder."""

    def __init__(self, *parts: str):
        self.parts = parts

    def __get__(self, ws, owner=None) -> Path:
        return self if ws is None else Path(ws, *self.parts)


class Workspace(_PathBase):
    """A workspace folder: a Path (so every Path use keeps working) that names its parts.

    books/<id>/          processed books (<id>.tokens, .entities, .book, source.json)    data_prep.prepare
    who/                 the Who set: characters.json, who_questions.json, report.json  data_prep.who_set
    questions.json       every question of a prepared book; summaries.json, texts.json  data_prep.who_set
    engine.json          the engine and coreference weights the books were made with    data_prep.prepare
    data.json            the data folder the books came from (`prepare` without --data)  data_prep.prepare
    artificial/          artificial Who questions per book (<id>.jsonl.gz)               data_prep.artificial
    embeddings/          word2vec vectors, corpus and state.json (lineage, books)        data_prep.embeddings
    index/<ranker>/<id>  Lucene indexes                                                  whoqa.retrieval
    contexts/<ranker>/   each question's selected windows per book                       whoqa.retrieval.contexts
    memdata/<lineage>/   memory arrays per book, cached per word-vector lineage           whoqa.memnet.data
    models/              pretrained and trained models (memnet, BERT ranker, reader)     whoqa.memnet, whoqa.reader
    runs/, runs-archive/ memory-network cross-validation runs (and runs of other configs) whoqa.memnet.train
    adapted/             per-book adapted rows of a model                                 whoqa.memnet.adapt
    reader/              reader examples, state cache, runs (and their archive)           whoqa.reader
    eval-data/<name>/    another data folder prepared for `eval --data`                   whoqa.evaluation.unseen
    results/             results JSON and tables                                          whoqa.evaluation
    served/              served answers of `eval --data` (in an eval-data/<name>/ folder)  whoqa.evaluation.unseen
    jobs/, uploads/      the web page's upload jobs and the files uploaded               whoqa.web.app
    quarantine/<time>/   damaged artifacts `whoqa check --repair` moved aside            whoqa.evaluation.doctor

    Each artifact's reader and writer is in whoqa.core.store (or with the stage that caches it: docs/architecture.md).
    """

    @property
    def read_only(self) -> bool:
        """Whether this process serves the workspace read-only (`serve_read_only`): nothing may be written in it."""
        return str(self.resolve()) in _read_only

    # the fixed parts, each named once (a Path under the workspace)
    books = Part("books")
    who = Part("who")
    questions = Part("questions.json")
    summaries = Part("summaries.json")
    texts = Part("texts.json")
    engine_record = Part("engine.json")  # the engine and coreference weights books are made with
    data_record = Part("data.json")  # the NarrativeQA folder `prepare` took the books from (and takes again)
    prepare_report = Part("prepare_report.json")
    artificial = Part("artificial")
    embeddings = Part("embeddings")
    index = Part("index")
    contexts = Part("contexts")
    memdata = Part("memdata")
    models = Part("models")
    runs = Part("runs")
    runs_archive = Part("runs-archive")
    adapted = Part("adapted")
    reader = Part("reader")
    reader_runs = Part("reader", "runs")
    reader_runs_archive = Part("reader", "runs-archive")
    llm_runs = Part("reader", "llm")
    llm_runs_archive = Part("reader", "llm-archive")
    reader_models = Part("models", "reader")
    eval_data = Part("eval-data")
    results = Part("results")
    served = Part("served")  # the served answers of `eval --data` (this workspace being an eval-data/<name>/ folder)
    jobs = Part("jobs")  # the web page's upload jobs (<id>.json)
    uploads = Part("uploads")
    quarantine = Part("quarantine")  # where `whoqa check --repair` moves damaged artifacts (a folder per repair)
    lock = Part(".lock")
    who_characters = Part("who", "characters.json")
    who_questions = Part("who", "who_questions.json")
    who_report = Part("who", "report.json")
    artificial_report = Part("artificial", "report.json")
    corpus = Part("embeddings", "corpus")  # word2vec's corpus: one file of sentences per book
    word2vec = Part("embeddings", "word2vec.model")
    vocab = Part("embeddings", "vocab.json")
    embeddings_state = Part("embeddings", "state.json")

    def book(self, book_id: str) -> Path:
        return Path(self, "books", book_id)

    def book_file(self, book_id: str, suffix: str) -> Path:
        """One of a prepared book's files: suffix .tokens, .entities or .book (whoqa.core.book.SUFFIXES)."""
        return Path(self, "books", book_id, f"{book_id}{suffix}")

    def page_summary(self, book_id: str) -> Path:
        """The web page's cached summary of a book (remade when its files change)."""
        return Path(self, "books", book_id, "summary.json")

    def reader_examples(self, context: str) -> Path:
        return Path(self, "reader", "examples", f"{context}.json")

    def artificial_questions(self, book_id: str) -> Path:
        return Path(self, "artificial", f"{book_id}.jsonl.gz")

    def corpus_file(self, book_id: str) -> Path:
        return Path(self, "embeddings", "corpus", f"{book_id}.txt")

    def book_index(self, book_id: str) -> Path:
        """A book's BM25F Lucene index."""
        return Path(self, "index", "bm25f", book_id)

    def book_vectors(self, book_id: str) -> Path:
        """A book's MiniLM sentence vectors (whoqa.retrieval.passages.DenseIndex), beside its BM25F index."""
        return Path(self, "index", "minilm", f"{book_id}.npy")

    def contexts_file(self, ranker: str, book_id: str) -> Path:
        return Path(self, "contexts", ranker, f"{book_id}.json")

    def contexts_report(self, ranker: str) -> Path:
        return Path(self, "contexts", ranker, "report.json")

    def memory_arrays(self, lineage: str, book_id: str) -> Path:
        return Path(self, "memdata", lineage, f"{book_id}.npz")

    def derived_from_book(self, book_id: str) -> list[Path]:
        """Every file or folder the stages derive from one book, named here with the layout so that no stage names
        another's: what `prepare` removes when a book's text changes (its artificial questions, corpus file, index,
        contexts of each ranker, memory arrays of each vector lineage)."""
        def subfolders(folder: Path) -> list[str]:
            return sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []
        return [self.artificial_questions(book_id), self.corpus_file(book_id), self.book_index(book_id),
                self.book_vectors(book_id),
                *(self.contexts_file(r, book_id) for r in subfolders(self.contexts)),
                *(self.memory_arrays(lineage, book_id) for lineage in subfolders(self.memdata))]

    def model(self, name: str) -> Path:
        return Path(self, "models", name)

    def run(self, name: str) -> Path:
        return Path(self, "runs", name)


HOME_ENV = "WHOQA_HOME"


def default_home() -> Path:
    """The workspace `ask` and `chat` use when none is named, so a book can be asked about from any folder:
    $WHOQA_HOME, else the user's data folder (platformdirs' rule where it is installed, else XDG's:
    $XDG_DATA_HOME/whoqa, ~/.local/share/whoqa)."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    try:
        from platformdirs import user_data_dir
        return Path(user_data_dir("whoqa", appauthor=False))
    except ImportError:
        return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "whoqa"


def check_workspace(workspace: str | Path) -> Path:
    ws = Path(workspace)
    if ws.exists() and not ws.is_dir():
        raise WorkspaceError(f"workspace {ws} is a file, not a folder: pass --workspace with a folder path")
    return ws


@contextmanager
def locked(workspace: str | Path):
    """Hold WS/.lock exclusively (waits for another holder, saying so). Released when the process ends, however."""
    ws = check_workspace(workspace)
    ws.mkdir(parents=True, exist_ok=True)
    key = str(ws.resolve())
    if _held.get(key):
        _held[key] += 1
        try:
            yield ws
        finally:
            _held[key] -= 1
        return
    fd = os.open(Workspace(ws).lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("workspace %s is in use by another whoqa command; waiting for it to finish", ws)
            fcntl.flock(fd, fcntl.LOCK_EX)
        _held[key] = 1
        yield ws
    finally:
        _held.pop(key, None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
