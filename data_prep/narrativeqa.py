"""NarrativeQA folder I/O: the official csv files by their column names, and a book's story text.

Layout (what `whoqa download` builds and ../shared/data holds):
    DIR/narrativeqa/documents.csv, qaps.csv, summaries.csv   (or the csv files directly in DIR)
    DIR/books/<document_id>.txt             books with questions
    DIR/books-unlabeled/<document_id>.txt   books without questions (artificial questions, word vectors only)
"""
from __future__ import annotations

import csv
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

DOCUMENT_COLUMNS = ["document_id", "set", "kind", "story_url", "story_file_size", "wiki_url", "wiki_title",
                    "story_word_count", "story_start", "story_end"]
QUESTION_COLUMNS = ["document_id", "set", "question", "answer1", "answer2"]
SUMMARY_COLUMNS = ["document_id", "set", "summary"]


class DataError(Exception):
    """Bad input the user can fix: the message names the file and what to do."""


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


def file_sha1(path: Path) -> str:
    import hashlib
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


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


CONTROL_SHARE = 0.01  # more C0/C1 control characters than this share (tabs, line and page ends aside): not a text
_C1 = re.compile("[\x80-\x9f]")


def read_book(path: Path) -> tuple[str, str]:
    """(text, encoding) of a book file: UTF-16 with its byte-order mark, else UTF-8, else Windows-1252; LF line ends,
    C1 control characters removed. A file that is empty, binary, undecodable or mostly control characters raises
    DataError naming it."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 (a Windows editor's "Unicode"): its NUL bytes are text
        try:
            raw = raw.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{path} starts as UTF-16 text but does not decode as it: convert it to UTF-8") from None
        text, _ = read_book_bytes(path, raw)
        return text, "utf-16"
    return read_book_bytes(path, raw)


def read_book_bytes(path: Path, raw: bytes) -> tuple[str, str]:
    if not raw.strip():
        raise DataError(f"{path} is empty: give a book's text")
    if b"\x00" in raw[:65536]:
        raise DataError(f"{path} looks binary (NUL bytes): give a plain-text book (UTF-8)")
    for enc in ("utf-8-sig", "cp1252"):
        try:
            text = raw.decode(enc)
            break
        except UnicodeDecodeError:
            continue
    else:
        raise DataError(f"{path} is neither UTF-8 nor Windows-1252 text: convert it to UTF-8")
    bad = sum(1 for ch in text if (ord(ch) < 32 and ch not in "\t\n\r\f") or 0x7F <= ord(ch) < 0xA0)
    if bad > CONTROL_SHARE * len(text):
        raise DataError(f"{path} is mostly not text ({bad:,} control characters in {len(text):,}): give a plain-text "
                        f"book (UTF-8)")
    return _C1.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n")), enc.replace("-sig", "")


def read_text(path: Path) -> str:
    """Decode a text file: UTF-8 (with or without BOM), else Windows-1252, else Latin-1; LF line ends."""
    raw = Path(path).read_bytes()
    for enc in ("utf-8-sig", "cp1252"):
        try:
            text = raw.decode(enc)
            break
        except UnicodeDecodeError:
            log.warning("%s is not valid %s; trying the next encoding", path, enc)
    else:
        text = raw.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")


_START = re.compile(r"^\*{3}\s*START OF[^\n]*?PROJECT GUTENBERG[^*]*\*{3}[^\n]*$", re.I | re.M)
_END = re.compile(r"^(\*{3}\s*END OF[^\n]*PROJECT GUTENBERG|End of (the )?Project Gutenberg|End of this Project Gutenberg)",
                  re.I | re.M)
_MARKER_TAIL = re.compile(r"\A\s*[^\n]*\*{3}[ \t]*\n")
_CREDITS = re.compile(r"^\s*(Produced by|E-text prepared by|Transcribed from|This etext was prepared)[^\n]*(\n[^\n]+)*\n\s*\n",
                      re.I)


def _loose(phrase: str) -> re.Pattern | None:
    """A regex for NarrativeQA's tokenised start/end phrase ("http : //x") that tolerates any spacing."""
    toks = phrase.split()
    if not toks:
        return None
    return re.compile(r"\s*".join(re.escape(t) for t in toks))


def extract_body(text: str, story_start: str = "", story_end: str = "") -> str:
    """Cut a story out of its file.

    NarrativeQA's story_start/story_end phrases mark the span it used; for Gutenberg files that span still holds
    the producer credits and the licence, so within it we also cut at Gutenberg's START/END markers and drop a
    leading credits paragraph. Files with neither give the whole text back.
    """
    start, end = 0, len(text)
    if (p := _loose(story_start)) and (m := p.search(text)):
        start = m.start()
    if (p := _loose(story_end)):
        last = None
        for last in p.finditer(text, start):
            pass
        if last is not None:
            end = last.end()
    body = text[start:end]
    if m := _START.search(body):
        body = body[m.end():]
    if m := _END.search(body):
        body = body[:m.start()]
    body = _MARKER_TAIL.sub("", body, count=1)  # story_start fell inside a two-line START marker
    body = _CREDITS.sub("", body, count=1)
    return body.strip("\n ") + "\n"
