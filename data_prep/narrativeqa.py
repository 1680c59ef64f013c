"""NarrativeQA folder I/O: the official csv files by their column names, and a book's story text (decoded and cut
out of its file by whoqa.core.text).

Layout (what `whoqa download` builds and ../shared/data holds):
    DIR/narrativeqa/documents.csv, qaps.csv, summaries.csv   (or the csv files directly in DIR)
    DIR/books/<document_id>.txt             books with questions
    DIR/books-unlabeled/<document_id>.txt   books without questions (artificial questions, word vectors only)
"""
from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.text import DataError, extract_body, file_sha1, read_book, read_text

log = logging.getLogger(__name__)

DOCUMENT_COLUMNS = ["document_id", "set", "kind", "story_url", "story_file_size", "wiki_url", "wiki_title",
                    "story_word_count", "story_start", "story_end"]
QUESTION_COLUMNS = ["document_id", "set", "question", "answer1", "answer2"]
SUMMARY_COLUMNS = ["document_id", "set", "summary"]


@dataclass
class Document:
    document_id: str
    set: str
    kind: str
    story_url: str
    story_file_size: int
    wiki_title: str
    story_start: str
    story_end: str


@dataclass
class Question:
    question_id: int  # row index in qaps.csv (0-based, header excluded)
    document_id: str
    set: str
    question: str
    answer1: str
    answer2: str


@dataclass
class CsvReport:
    """What a csv read kept and skipped, so bad rows are counted, not silently lost."""
    path: str
    rows: int = 0
    skipped: list[str] = field(default_factory=list)


@dataclass
class NarrativeQA:
    """A NarrativeQA-layout folder."""
    root: Path

    def __post_init__(self):
        self.root = Path(self.root)
        if not self.root.is_dir():
            raise DataError(f"data folder {self.root} does not exist: pass --data with a NarrativeQA-layout folder "
                            f"(run `whoqa download --data {self.root}` on a connected machine to build one)")

    def csv_path(self, name: str) -> Path:
        for p in (self.root / "narrativeqa" / name, self.root / name, self.root / "third_party" / "wikipedia" / name):
            if p.is_file():
                return p
        raise DataError(f"{name} not found in {self.root} (looked in narrativeqa/, the folder itself and "
                        f"third_party/wikipedia/); run `whoqa download --data {self.root}` to fetch it")

    def documents(self) -> dict[str, Document]:
        rows, _ = read_csv(self.csv_path("documents.csv"), DOCUMENT_COLUMNS)
        docs = {}
        for _, r in rows:
            try:
                size = int(r["story_file_size"] or 0)
            except ValueError:
                size = 0
            docs[r["document_id"]] = Document(r["document_id"], r["set"], r["kind"], r["story_url"], size,
                                              r["wiki_title"], r["story_start"], r["story_end"])
        return docs

    def questions(self) -> list[Question]:
        rows, _ = read_csv(self.csv_path("qaps.csv"), QUESTION_COLUMNS)
        return [Question(i, r["document_id"], r["set"], r["question"], r["answer1"], r["answer2"]) for i, r in rows]

    def summaries(self) -> dict[str, str]:
        rows, _ = read_csv(self.csv_path("summaries.csv"), SUMMARY_COLUMNS)
        return {r["document_id"]: r["summary"] for _, r in rows}

    def book_path(self, document_id: str) -> Path | None:
        for sub in ("books", "books-unlabeled"):
            p = self.root / sub / f"{document_id}.txt"
            if p.is_file():
                return p
        return None

    def book_ids(self, unlabeled: bool = False) -> list[str]:
        """Books present on disk: those of books/ and, with unlabeled, of books-unlabeled/ too."""
        subs = ["books"] + (["books-unlabeled"] if unlabeled else [])
        ids = []
        for sub in subs:
            d = self.root / sub
            if d.is_dir():
                ids += sorted(p.stem for p in d.glob("*.txt"))
        return ids

    def book_text(self, document_id: str, documents: dict[str, Document] | None = None) -> str:
        """The story body of a book: decoded, LF line ends, Gutenberg header and licence removed."""
        return self.book_source(document_id, documents)[0]

    def book_source(self, document_id: str, documents: dict[str, Document] | None = None) -> tuple[str, dict]:
        """(story body, {"sha1" of the file, "encoding"}) of a book."""
        path = self.book_path(document_id)
        if path is None:
            raise DataError(f"book {document_id}: no file books/{document_id}.txt under {self.root}; "
                            f"run `whoqa download --data {self.root}`")
        doc = (documents if documents is not None else self.documents()).get(document_id)
        text, encoding = read_book(path)
        body = extract_body(text, doc.story_start if doc else "", doc.story_end if doc else "")
        return body, {"sha1": file_sha1(path), "encoding": encoding}


def csv_records(text: str, width: int | None = None):
    """(first physical line, fields or None, problem) per record of a whole csv text; quoted newlines survive.

    A record whose field count is not `width` is reported; when it spans several lines (an unterminated quote that
    swallowed the rows after it), parsing restarts on the line after its first, so one broken row never takes or
    shifts the others.
    """
    lines = text.splitlines(keepends=True)
    pos = 0
    while pos < len(lines):
        reader = csv.reader(lines[pos:])
        done = 0  # lines of lines[pos:] consumed so far
        restart = None
        try:
            for row in reader:
                first, done = pos + done + 1, reader.line_num
                span = pos + done - first + 1
                if width is not None and row and len(row) != width:
                    yield first, None, f"{len(row)} fields, expected {width}"
                    if span > 1:
                        restart = first  # 0-based index of the line after the record's first
                        break
                    continue
                yield first, row, None
        except csv.Error as e:
            first = pos + done + 1
            yield first, None, str(e)
            restart = first
        if restart is None:
            return
        pos = restart


def read_csv(path: Path, columns: list[str]) -> tuple[list[tuple[int, dict]], CsvReport]:
    """Rows as (row index, dict); malformed rows are skipped with a warning naming their line, and counted.

    The row index counts every data row, kept or not, so question ids stay the official row numbers.
    """
    path = Path(path)
    report = CsvReport(str(path))
    text = read_text(path)
    try:
        header = next(csv.reader([text.split("\n", 1)[0]]))
    except StopIteration:
        raise DataError(f"{path} is empty: expected a header with columns {columns}")
    missing = [c for c in columns if c not in header]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}; found {header}. Is this the official NarrativeQA file?")
    idx = {c: header.index(c) for c in columns}
    out = []
    records = csv_records(text, len(header))
    next(records)  # the header
    i = -1
    for line, row, problem in records:
        if row == []:
            continue
        i += 1
        report.rows += 1
        if problem:
            report.skipped.append(f"line {line} (row {i}): {problem}")
            continue
        rec = {c: row[j] for c, j in idx.items()}
        if not rec["document_id"]:
            report.skipped.append(f"line {line} (row {i}): empty document_id")
            continue
        out.append((i, rec))
    if report.skipped:
        log.warning("%s: skipped %d malformed row(s): %s", path, len(report.skipped), "; ".join(report.skipped[:3]))
    return out, report
