"""Books as PDF files: the text layer in reading order, as the same engine reads a plain-text book.

A PDF is pages of lines, not paragraphs, and a printed book repeats its running head and page number on every page:
each page's text comes from pypdf, lines repeated at the top or bottom of many pages (the digits ignored) and bare
page numbers are dropped, a word hyphenated across a line end is joined (keeping the hyphen of a compound the book
writes so elsewhere: "well-known"), and paragraphs are told by a line that ends
a sentence well short of the page's width. A chapter heading ("CHAPTER III", "Chapter 12") becomes a paragraph of its
own so `--upto "Chapter 3"` finds it. A scanned PDF (no text layer) or one that asks for a password is one DataError
line before anything is written.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from whoqa.core.errors import DataError

PDF_SUFFIXES = (".pdf",)
PDF_MAGIC = b"%PDF-"  # what a PDF file opens with (within its first 1,024 bytes)
REPEATED_SHARE = 0.3  # a top or bottom line on this share of the pages (at least 3) is a running head or foot
EDGE_LINES = 2  # lines at each end of a page where heads, feet and page numbers are looked for
TEXT_PER_PAGE = 200  # characters a page of a text PDF holds at least on average; fewer: scanned images
PARAGRAPH_END = 0.8  # a line ending a sentence shorter than this share of the usual line width ends a paragraph
_PAGE_NUMBER = re.compile(r"^\s*(page\s+)?(\d{1,4}|[ivxlcdm]{1,7})\s*$", re.I)
_HEADING = re.compile(r"^\s*(chapter|book|part|volume)\s+([0-9]+|[ivxlcdm]+|[a-z]+)\b.{0,60}$", re.I)
GAP, INDENT = "", "\f"  # a line's marks in a page's lines: a paragraph starts after a blank line, or indented
_COMPOUND = re.compile(r"[A-Za-z]+-[A-Za-z]+")
_SENTENCE_END = re.compile(r"[.!?:;\"'’”)\]]\s*$")


def _shape(line: str) -> str:
    """A line with its digits blurred: "Chapter 3 · 41" and "Chapter 3 · 42" are one running head."""
    return re.sub(r"\d+", "#", line.strip().lower())


def _layout_lines(page: str) -> list[str]:
    """A page's lines as pypdf lays them out (its positions kept as spaces, its vertical gaps as blank lines), each
    stripped, with a mark before a line that starts a paragraph: INDENT where it is indented past the page's usual
    left margin (a printed book's first-line indent), GAP where only a blank line comes before it."""
    lines = [l.rstrip() for l in page.splitlines()]
    indents = Counter(len(l) - len(l.lstrip()) for l in lines if l.strip())
    margin = min((i for i, n in indents.items() if n == max(indents.values())), default=0)  # the most common
    out: list[str] = []
    gap = False
    for l in lines:
        if not l.strip():
            gap = bool(out)
            continue
        if out and len(l) - len(l.lstrip()) >= margin + 2:
            out.append(INDENT)
        elif gap:
            out.append(GAP)
        out.append(l.strip())
        gap = False
    return out


def _strip_edges(pages: list[list[str]]) -> list[list[str]]:
    """Pages without their running heads and feet (lines of one shape at the top or bottom of many pages) and bare
    page numbers."""
    text = [[l for l in lines if l not in (GAP, INDENT)] for lines in pages]
    edges = [lines[:EDGE_LINES] + lines[-EDGE_LINES:] for lines in text]
    counts = Counter(s for lines in edges for s in {_shape(l) for l in lines})
    repeated = {s for s, n in counts.items() if s and n >= max(3, REPEATED_SHARE * len(pages))}
    out, headings = [], set()
    for lines in pages:
        keep = list(lines)
        for edge in (0, -1):  # the top, then the bottom
            for _ in range(EDGE_LINES):
                if not keep:
                    break
                line = keep[edge].strip()
                if line in (GAP, INDENT):  # (the mark a line taken away left)
                    keep.pop(edge)
                    continue
                if _HEADING.match(line) and line.lower() not in headings:  # a chapter's first page: its heading
                    headings.add(line.lower())
                    break
                if _shape(line) in repeated or _PAGE_NUMBER.match(line):
                    keep.pop(edge)
                else:
                    break
        while keep and keep[-1] in (GAP, INDENT):
            keep.pop()
        if keep and keep[0] == GAP:  # a gap under a running head: a new paragraph only where the last page's ended
            keep.pop(0)             # a sentence
            if out and out[-1] and _SENTENCE_END.search(out[-1][-1]):
                keep.insert(0, GAP)
        out.append(keep)
    return out


def _paragraphs(lines: list[str]) -> str:
    """Lines joined into paragraphs (blank lines between): hyphenated words joined, a short line that ends a sentence
    or a chapter heading closes its paragraph."""
    compounds = {m.group().lower() for l in lines for m in _COMPOUND.finditer(l)}  # "well-known" inside a line
    lengths = sorted(len(l) for l in lines if l.strip())  # (the marks are blank)
    width = lengths[int(0.9 * (len(lengths) - 1))] if lengths else 0  # the usual full line
    paragraphs, current = [], ""
    for raw in lines:
        line = raw.strip()
        if not line:  # GAP or INDENT
            if current:
                paragraphs.append(current)
            current = ""
            continue
        if _HEADING.match(line) and len(line) < 0.7 * max(width, 1):
            if current:
                paragraphs.append(current)
            paragraphs.append(line)
            current = ""
            continue
        if current.endswith("-") and len(current) > 1 and current[-2].isalpha() and line[:1].islower():
            head = current.split()[-1].lstrip("\"'“‘(").lower() + re.match(r"[a-z]*", line).group()
            current = current + line if head in compounds else current[:-1] + line  # "well-known"; "remembered"
        else:
            current = f"{current} {line}" if current else line
        if _SENTENCE_END.search(line) and len(line) < PARAGRAPH_END * width:
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    return "\n\n".join(paragraphs)


def read_pdf(path: Path) -> str:
    """A PDF book's text (module docstring); DataError, naming the file, for a damaged, password-protected or
    scanned (image-only) PDF."""
    path = Path(path)
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise DataError("reading PDF files needs pypdf: `pip install pypdf` (install.sh installs it)") from None
    if PDF_MAGIC not in path.read_bytes()[:1024]:
        raise DataError(f"{path} is not a PDF (no %PDF- header): give a .pdf file, or the book as plain text")
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):  # (an owner password alone still opens)
            raise DataError(f"{path} is password-protected: open it in a PDF viewer and save a copy without the "
                            f"password, or give the book as plain text")
        pages = [_layout_lines(page.extract_text(extraction_mode="layout") or "") for page in reader.pages]
    except DataError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise DataError(f"{path} is a damaged PDF ({type(e).__name__}: {str(e)[:120]}): export it again, or give the "
                        f"book as plain text") from None
    except Exception as e:  # noqa: BLE001 (pypdf raises many kinds on a broken file, its crypto ones among them)
        raise DataError(f"{path} could not be read as a PDF ({type(e).__name__}: {str(e)[:120]}): export it again, "
                        f"or give the book as plain text") from None
    chars = sum(len(l) for lines in pages for l in lines if l not in (GAP, INDENT))
    if not pages or chars < TEXT_PER_PAGE * len(pages) / 4:
        raise DataError(f"{path} has no text layer ({chars:,} characters on {len(pages)} page(s)): it looks scanned; "
                        f"run OCR on it first (e.g. `ocrmypdf`), or give the book as text")
    lines = [l for page in _strip_edges(pages) for l in page]
    return _paragraphs(lines) + "\n"
