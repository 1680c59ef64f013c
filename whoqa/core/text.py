"""A book file's text: decoded (UTF-16 with its mark or told by its NUL bytes, UTF-8, Windows-1252), a Project
Gutenberg header and licence cut off, EPUB and HTML read by `whoqa.core.epub`, PDF by `whoqa.core.pdf`, Kindle books by
`whoqa.core.kindle`; and the book id a text gets. Every way
a book comes in (a NarrativeQA folder, `ask --text`, an upload) reads it here; what it cannot read is a DataError
naming the file."""
from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from whoqa.core.epub import EPUB_SUFFIXES, HTML_SUFFIXES
from whoqa.core.errors import DataError
from whoqa.core.kindle import KINDLE_SUFFIXES, is_kindle
from whoqa.core.pdf import PDF_MAGIC, PDF_SUFFIXES

log = logging.getLogger(__name__)


def file_sha1(path: Path) -> str:
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


CONTROL_SHARE = 0.01  # more C0/C1 control characters than this share (tabs, line and page ends aside): not a text
_C1 = re.compile("[\x80-\x9f]")


def read_book(path: Path) -> tuple[str, str]:
    """(text, encoding) of a book file: UTF-16 with its byte-order mark (or without, told by its NUL bytes), else
    UTF-8, else Windows-1252; LF line ends, C1 control characters removed. A file that is empty, binary, undecodable
    or mostly control characters raises DataError naming it."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 (a Windows editor's "Unicode"): its NUL bytes are text
        try:
            raw = raw.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{path} starts as UTF-16 text but does not decode as it: convert it to UTF-8") from None
        text, _ = read_book_bytes(path, raw)
        return text, "utf-16"
    encoding = utf16_without_mark(raw)
    if encoding:
        text, _ = read_book_bytes(path, raw.decode(encoding).encode("utf-8"))
        return text, encoding
    return read_book_bytes(path, raw)


UTF16_PROBE = 4096  # bytes looked at for UTF-16 without a byte-order mark
PRINTABLE_SHARE = 0.95  # of the characters a UTF-16 reading gives: less, and the file is binary after all


def utf16_without_mark(raw: bytes) -> str | None:
    """"utf-16-le" or "utf-16-be" for UTF-16 text written without its byte-order mark, else None. Such a file's
    Latin letters each carry a NUL byte, all on odd bytes (LE) or all on even ones (BE), so it would be refused as
    binary; it is UTF-16 only when most bytes on one side are NUL, few on the other, the whole file decodes and the
    text is printable (a binary file of small numbers has the NULs but not the text)."""
    head = raw[:UTF16_PROBE - UTF16_PROBE % 2]
    if len(raw) % 2 or len(head) < 2:
        return None
    pairs = len(head) // 2
    even, odd = head[0::2].count(0) / pairs, head[1::2].count(0) / pairs
    encoding = "utf-16-le" if odd > 0.5 and even < 0.05 else "utf-16-be" if even > 0.5 and odd < 0.05 else None
    if encoding is None:
        return None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        return None
    sample = text[:65536]
    printable = sum(1 for ch in sample if ch.isprintable() or ch in "\t\n\r\f")
    return encoding if printable >= PRINTABLE_SHARE * len(sample) else None


def read_book_bytes(path: Path, raw: bytes) -> tuple[str, str]:
    if not raw.strip():
        raise DataError(f"{path} is empty: give a book's text")
    if b"\x00" in raw[:65536]:
        raise DataError(f"{path} looks binary, not a book's text: give the book as {BOOK_FORMATS}")
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


_TITLE = re.compile(r"^Title:[ \t]*(.+(?:\n[ \t]+\S.*)*)", re.M)  # a Gutenberg header's, continued on indented lines
_SMALL = {"a", "an", "and", "as", "at", "by", "for", "in", "of", "on", "or", "the", "to", "with"}


def book_title(text: str, body: str) -> str:
    """A book's title as a reader would write it: its Project Gutenberg header's "Title:" line where it has one,
    else the story's first line, in title case where the book writes it in capitals ("THE POISON BELT" -> "The
    Poison Belt"); at most 80 characters."""
    head = text[:_START.search(text).start()] if _START.search(text) else text[:3000]
    m = _TITLE.search(head)
    line = " ".join(m.group(1).split()) if m else next((l.strip() for l in body.splitlines() if l.strip()), "")
    if line.isupper():
        words = line.lower().split()
        line = " ".join(w if k and w in _SMALL else w[:1].upper() + w[1:] for k, w in enumerate(words))
    return line[:80]


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


@dataclass(frozen=True)
class BookFormat:
    """A kind of book file whoqa reads: what it is called, its suffixes and media types (the page's file picker
    offers them), and which module reads it (`read_book_text`)."""
    name: str
    suffixes: tuple[str, ...]
    media: tuple[str, ...]
    reader: str  # "text", "epub", "html", "pdf" or "kindle"


FORMATS = (  # the one table of formats: the CLI's help, the intake's messages and the page's `accept` read it
    BookFormat("plain text", (".txt",), ("text/plain",), "text"),
    BookFormat("EPUB", EPUB_SUFFIXES, ("application/epub+zip",), "epub"),
    BookFormat("HTML", HTML_SUFFIXES, ("text/html",), "html"),
    BookFormat("PDF", PDF_SUFFIXES, ("application/pdf",), "pdf"),
    BookFormat("Kindle (MOBI/AZW3)", KINDLE_SUFFIXES, (), "kindle"),
)
BOOK_FORMATS = ", ".join(f.name for f in FORMATS[:-1]) + f" or {FORMATS[-1].name}"  # "plain text, EPUB, ... or Kindle"
BOOK_SUFFIXES = tuple(s for f in FORMATS if f.reader != "text" for s in f.suffixes)  # read by format, not as text
ACCEPT = ",".join([s for f in FORMATS for s in f.suffixes] + [m for f in FORMATS for m in f.media])  # <input accept>


def read_book_text(path: Path) -> str:
    """A book file's text: plain text, EPUB (spine order, chapter titles kept), HTML, PDF (its text layer) or a Kindle
    book (MOBI/AZW3), by its suffix; refuses (DataError, naming it) what is missing, a folder, empty, binary,
    undecodable, DRM-protected, scanned or damaged."""
    from whoqa.core.epub import read_epub, read_html
    from whoqa.core.kindle import read_kindle
    from whoqa.core.pdf import read_pdf
    if Path(path).is_dir():
        raise DataError(f"{path} is a folder, not a file: pass a book file ({BOOK_FORMATS})")
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} not found: give a book file ({BOOK_FORMATS})")
    suffix = Path(path).suffix.lower()
    readers = {"epub": read_epub, "html": read_html, "pdf": read_pdf, "kindle": read_kindle}
    for f in FORMATS:
        if suffix in f.suffixes and f.reader in readers:
            return readers[f.reader](path)
    raw = Path(path).read_bytes()[:1024]
    if raw.startswith(PDF_MAGIC):  # a PDF under another name is still read as one
        return read_pdf(path)
    if is_kindle(raw):
        return read_kindle(path)
    return read_book(path)[0]


SHINGLE, SAMPLE, SAME_BOOK = 8, 32, 0.6  # 8-word shingles, one in 32 kept (by hash); this share shared: one book
WHOLE = 20_000  # a text of fewer words keeps every shingle (sampled, a short story would keep too few to compare)


def text_shingles(body: str) -> list[int]:
    """A text's sampled word shingles (hashes of 8-word runs, lower-cased, punctuation and markup gone; those whose
    hash is 0 mod SAMPLE, or all of a short text's), sorted: the same story from another file (an EPUB and the plain
    text, another edition's front matter) shares most of them, another story almost none."""
    words = re.findall(r"[a-z0-9]+", body.lower())
    sample = 1 if len(words) < WHOLE else SAMPLE
    out = set()
    for i in range(len(words) - SHINGLE + 1):
        h = int.from_bytes(hashlib.blake2b(" ".join(words[i:i + SHINGLE]).encode(), digest_size=8).digest(), "big")
        if h % sample == 0:
            out.add(h % 2**53)  # (JSON-safe as a number everywhere)
    return sorted(out)


def same_text(a: list[int], b: list[int]) -> bool:
    """Whether two texts' shingles (`text_shingles`) say they are one book: a share SAME_BOOK of the smaller set's
    shingles in both."""
    if not a or not b:
        return False
    return len(set(a) & set(b)) / min(len(a), len(b)) >= SAME_BOOK


def text_book_id(body: str) -> str:
    """A book id derived from its text (40 hex digits, like NarrativeQA's): the same text is the same book."""
    return hashlib.sha1(body.encode("utf-8")).hexdigest()
