"""What is derived from each processed book, resumable: its artificial questions and its word2vec corpus (one read
of its saved parses), and the report of them (WS/artificial/report.json)."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from data_prep.workers import pooled
from whoqa.core.progress import bar as progress_bar
from whoqa.core.store import read_derive_report, write_derive_report
from whoqa.core.workspace import Workspace

log = logging.getLogger(__name__)


def _derive_work(workspace: str, book_id: str) -> tuple[str, dict | None, str | None]:
    """Artificial questions and the word2vec corpus of one processed book (one read of its saved parses)."""
    from data_prep.artificial import generate
    from whoqa.core.store import write_artificial
    from whoqa.core.book import Book
    from data_prep.embeddings import write_corpus
    ws = Workspace(workspace)
    try:
        t0 = time.perf_counter()
        book = Book.load(ws.books / book_id, book_id)
        qs, stats = generate(book)
        write_corpus(book, ws.corpus)
        write_artificial(ws.artificial_questions(book_id), qs)  # last: marks the book derived
        return book_id, {**stats, "seconds": round(time.perf_counter() - t0, 3)}, None
    except Exception as e:
        return book_id, None, f"{type(e).__name__}: {e}"


def derive(workspace: Path, book_ids: list[str], jobs: int = 1, progress: bool = True) -> dict:
    """Per-book derived artifacts, resumable: books whose question file exists are not redone. The report (written,
    and returned without per_book) counts every book of the workspace with questions, these among them."""
    ws = Workspace(workspace)
    old = read_derive_report(ws)  # a damaged report: its figures are counted again
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
    # the workspace's report, merged: every book with questions counts (one book taken in adds to the figures of the
    # books prepared before it, never replaces them), and a book removed since is dropped
    per_book = {b: v for b, v in per_book.items() if ws.artificial_questions(b).is_file()}
    totals: dict = {}
    for b in per_book:
        for k, v in per_book[b].items():
            if k != "seconds":
                totals[k] = totals.get(k, 0) + v
    done_now = [b for b in todo if b not in failed]
    n_new = sum(per_book[b].get("questions", 0) for b in done_now)
    report = {"totals": totals, "books": len(per_book), "books_done": len(done_now), "failed": failed,
              "questions_per_second": round(n_new / seconds) if done_now and seconds else None,
              "per_book": per_book}
    write_derive_report(ws, report)
    return {k: v for k, v in report.items() if k != "per_book"}
