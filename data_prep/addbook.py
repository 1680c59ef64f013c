"""Adding a book to a workspace after models were trained on it: process it, make its artificial questions and word2vec
corpus, fold it into the word vectors (existing rows never move) and index it. Used by `whoqa ask --text/--data`
and `whoqa eval --data`; every step is skipped when already done, so later questions about the book are quick.
"""
from __future__ import annotations

import logging
import re
import shutil
import time
from pathlib import Path

from data_prep.embeddings import fold_in
from data_prep.derive import derive
from data_prep.engines import recorded_engine
from data_prep.prepare import PrepareConfig, prepare
from data_prep.workers import process_text
from whoqa.core.book import is_done, read_characters
from whoqa.core.files import atomic_write
from whoqa.core.store import forget_derived, load_texts, read_state, write_source, write_texts
from whoqa.core.text import (DataError, book_title, extract_body, read_book_text, same_text, text_book_id,
                             text_shingles)
from whoqa.core.workspace import Workspace, locked

log = logging.getLogger(__name__)


def add_text(workspace: Path, path: Path, engine=None, timings: dict | None = None, stages=None,
             parse_processes: int | None = None) -> str:
    """Prepare a book file (plain text, EPUB, HTML, PDF or Kindle; a Project Gutenberg header and licence removed when present) into the workspace, made
    by the engine its `prepare` recorded (unless `engine` is given), and fold it into the word vectors if the
    workspace has any; returns its id. A text in which the engine finds no person is refused (DataError) and leaves
    nothing behind: whoqa answers with a book's characters. `timings`, if given, receives the seconds of each part
    (engine, fold_in); `stages` (whoqa.core.progress.Stages), if given, shows which part runs; `parse_processes`
    (None: PrepareConfig's default) parses the book across that many processes. This Python's string-hash seed plays no
    part: the book is made as the command makes it (data_prep.characters._name_refs)."""
    from whoqa.core.progress import Stages
    timings = {} if timings is None else timings
    stages = stages or Stages()
    ws = Workspace(workspace)
    t0 = time.perf_counter()
    stages.stage("reading the book")
    text = read_book_text(path)
    body = extract_body(text)
    if not body.strip():
        raise DataError(f"{path} holds no story text once the Project Gutenberg header and licence are removed")
    book_id = text_book_id(body)
    shingles = text_shingles(body)
    with locked(ws):
        folder = ws.books / book_id
        new = not is_done(folder, book_id)
        if new and (kept := same_book(ws, shingles)) is not None:
            log.warning("%s is the book already kept as %s (the same text in another file or format): that one "
                        "answers", path, kept)
            return kept
        report = ws.artificial_report  # (rewritten by the book's questions before its fold can fail)
        saved = report.read_bytes() if report.is_file() else None
        try:
            _add_text(ws, path, body, book_id, engine, timings, t0, stages, parse_processes, shingles,
                      book_title(text, body))
        except BaseException:  # a later step failed (vectors, questions): no half-made book is left in books/
            if new:
                forget_derived(ws, book_id)
                _put_back(report, saved)  # (nor its figures in the report of the workspace's artificial questions)
            raise
    return book_id


def same_book(ws: Workspace, shingles: list[int]) -> str | None:
    """The id of a book of the workspace taken in from a file whose text is this one's in another form (its source
    record's shingles: whoqa.core.text.same_text), else None."""
    from whoqa.core.store import read_source
    if not ws.books.is_dir():
        return None
    for folder in sorted(p for p in ws.books.iterdir() if p.is_dir()):
        try:
            kept = (read_source(folder) or {}).get("shingles")
        except ValueError:  # a damaged record is `whoqa check`'s to name, not a reason to refuse this book
            continue
        if kept and is_done(folder, folder.name) and same_text(shingles, kept):
            return folder.name
    return None


def _put_back(path: Path, saved: bytes | None) -> None:
    """A file as it was before a failed step (None: it was not there)."""
    if saved is None:
        path.unlink(missing_ok=True)
    elif not path.is_file() or path.read_bytes() != saved:
        atomic_write(path, saved)


def _add_text(ws: Workspace, path: Path, body: str, book_id: str, engine, timings: dict, t0: float, stages,
              parse_processes: int | None = None, shingles: list[int] | None = None, title: str = "") -> None:
    """add_text's steps, under the workspace lock: the book made by the engine, folded in, then listed."""
    folder = ws.books / book_id
    if not is_done(folder, book_id):
        identity = None
        if engine is None:
            stages.stage("loading the language parser")
            engine, identity = recorded_engine(ws, parse_processes)
        try:
            # (always: it marks a book taken in from a text, which `intake_gaps` and `whoqa check` read; made_by None
            # where the engine was not the recorded one)
            write_source(folder, {"text": str(Path(path).resolve()), "made_by": identity, "shingles": shingles})
            words = len(re.findall(r"\w+|[^\w\s]", body))  # about the parser's tokens
            process_text(body, book_id, ws.books, engine, stages.stage("finding the characters", words, "word"))
            if not read_characters(folder / f"{book_id}.book"):
                raise DataError(f"{path}: no person was found in it, so it has no characters to answer Who "
                                f"questions with; it was not added")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # nothing half-made, and no book without characters
            raise
    timings["engine_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    if read_state(ws) is not None:  # a workspace without word vectors (no network: `ask --rerank`) has none to
        stages.stage("adding its characters to the word vectors")
        fold_books(ws, [book_id])   # fold into; `whoqa prepare` makes them for the whole workspace later
    texts = load_texts(ws)
    if book_id not in texts:  # (last: a book listed here is whole)
        texts[book_id] = {"path": str(Path(path).resolve()), "first_line": body.strip().splitlines()[0][:80],
                          "title": title or body.strip().splitlines()[0][:80]}
        write_texts(ws, texts)
    timings["fold_in_s"] = round(time.perf_counter() - t0, 2)


def add_from_data(workspace: Path, data: Path, book_id: str) -> str:
    """Prepare one book of a NarrativeQA folder into the workspace (its Who set is left as it is) and fold it in."""
    rep = prepare(PrepareConfig(str(data), str(workspace), books=[book_id], who_set=False, jobs=1), progress=False)
    if rep.failed:
        raise ValueError(f"book {book_id} of {data} could not be prepared: {rep.failed[book_id].splitlines()[0]}")
    return book_id


def prepare_folder(data: str, target: Path, jobs: int = 1, executor: str = "local", ray_address: str | None = None):
    """Another NarrativeQA folder's books prepared into a workspace of their own (`eval --data`), with their Who set
    and artificial questions but no word vectors (`fold_books` folds them into the evaluating workspace's)."""
    return prepare(PrepareConfig(data, str(target), jobs=jobs, unlabeled=False, artificial=True, embeddings=False,
                                 executor=executor, ray_address=ray_address), progress=False)


def fold_books(workspace: Path, book_ids: list[str], books_ws: Path | None = None) -> dict:
    """Artificial questions and corpus of processed books (under books_ws, default the workspace), folded into the
    workspace's word vectors."""
    ws = Workspace(workspace)
    src = Path(books_ws or ws)
    with locked(ws):
        rep = derive(src, book_ids, progress=False)
        if rep.get("failed"):
            b, err = next(iter(rep["failed"].items()))
            raise ValueError(f"book {b}: artificial questions or corpus failed: {err}")
        return fold_in(ws, {b: Workspace(src).corpus_file(b) for b in book_ids})
