"""Books as EPUB or HTML files: their text in reading order, for the same engine as a plain-text book.

An EPUB's documents are read in its spine's order (the order a reader pages through them), each turned into text
with its headings and paragraphs as paragraphs of their own; a chapter whose document carries no heading gets the
title its table of contents gives it, so `--upto "Chapter 12"` finds it. A DRM-protected EPUB (content listed as
encrypted in META-INF/encryption.xml; font obfuscation alone is not DRM), a damaged one or one without text is a
one-line DataError before anything is written to a workspace.
"""
from __future__ import annotations

import re
import zipfile
from html.parser import HTMLParser
from pathlib import Path

from whoqa.core.errors import DataError

EPUB_SUFFIXES = (".epub",)
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
ENCRYPTION = "META-INF/encryption.xml"
# the two font-obfuscation algorithms (IDPF's and Adobe's): fonts scrambled against copying, the text left readable
FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
BLOCKS = {"p", "div", "section", "article", "blockquote", "li", "ul", "ol", "table", "tr", "h1", "h2", "h3", "h4",
          "h5", "h6", "pre", "hr", "header", "footer", "aside", "figure", "figcaption", "dd", "dt", "body"}
SKIPPED = {"script", "style", "head", "title", "nav", "svg", "math", "rt", "rp"}


class _Text(HTMLParser):
    """An (X)HTML document's text: block elements become paragraphs (a blank line between them), <br> a line end,
    runs of spaces one space; scripts, styles and the head are left out."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in SKIPPED:
            self.skip += 1
        elif tag in BLOCKS:
            self.parts.append("\n\n")
        elif tag == "br":
            self.parts.append("\n")

    def handle_startendtag(self, tag, attrs):
        if tag == "br":
            self.parts.append("\n")
        elif tag in BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in SKIPPED:
            self.skip = max(0, self.skip - 1)
        elif tag in BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_text(markup: str) -> str:
    """The text of an (X)HTML document, one paragraph per block, separated by blank lines."""
    parser = _Text()
    parser.feed(markup)
    parser.close()
    paragraphs = (re.sub(r" *\n *", "\n", p).strip(" ") for p in re.split(r"\n\s*\n", "".join(parser.parts)))
    return "\n\n".join(p.strip() for p in paragraphs if p.strip())


def read_html(path: Path) -> str:
    """An HTML book file's text (UTF-8, else Windows-1252); DataError when it holds none."""
    raw = Path(path).read_bytes()
    try:
        markup = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        markup = raw.decode("cp1252", errors="replace")
    text = html_text(markup)
    if not text.strip():
        raise DataError(f"{path} holds no text: give a book's HTML")
    return text


def encrypted(archive: zipfile.ZipFile) -> list[str]:
    """The files an EPUB lists as encrypted by something other than font obfuscation (DRM); [] for none."""
    if ENCRYPTION not in archive.namelist():
        return []
    import xml.etree.ElementTree as ET
    try:
        root = ET.fromstring(archive.read(ENCRYPTION))
    except ET.ParseError:
        return [ENCRYPTION]  # an encryption record we cannot read: treated as DRM, never guessed readable
    found = []
    for data in root.iter():
        if not data.tag.endswith("EncryptedData"):
            continue
        method = next((e.get("Algorithm") for e in data.iter() if e.tag.endswith("EncryptionMethod")), None)
        ref = next((e.get("URI") for e in data.iter() if e.tag.endswith("CipherReference")), "?")
        if method not in FONT_OBFUSCATION:
            found.append(ref)
    return found


def _toc_titles(toc) -> dict[str, str]:
    """href (without its #fragment) -> the first title the table of contents gives it."""
    out: dict[str, str] = {}
    for entry in toc or ():
        if isinstance(entry, (tuple, list)):  # (Section, [children])
            head, children = entry[0], entry[1] if len(entry) > 1 else []
            if getattr(head, "href", None) and getattr(head, "title", None):
                out.setdefault(head.href.split("#")[0], head.title)
            for k, v in _toc_titles(children).items():
                out.setdefault(k, v)
        elif getattr(entry, "href", None) and getattr(entry, "title", None):
            out.setdefault(entry.href.split("#")[0], entry.title)
    return out


def read_epub(path: Path) -> str:
    """An EPUB's text in spine order: its title first, then each document's text, a document the table of contents
    titles but which shows no heading preceded by that title. DataError (one line, naming the file) for a
    DRM-protected, damaged or empty EPUB."""
    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise DataError(f"{path} is not an EPUB (not a zip archive): give an .epub file, or the book as plain text")
    try:
        with zipfile.ZipFile(path) as archive:
            locked = encrypted(archive)
    except (zipfile.BadZipFile, OSError) as e:
        raise DataError(f"{path} is a damaged EPUB ({e}): export it again") from None
    if locked:
        raise DataError(f"{path} is DRM-protected ({len(locked)} encrypted file(s), e.g. {locked[0]}): whoqa reads "
                        f"only EPUBs without DRM")
    import warnings
    try:
        from ebooklib import ITEM_DOCUMENT, epub
    except ImportError:
        raise DataError("reading EPUB files needs ebooklib: `pip install ebooklib` (install.sh installs it)") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ebooklib's FutureWarnings about its own options
            book = epub.read_epub(str(path), options={"ignore_ncx": False})
    except Exception as e:  # ebooklib raises plain exceptions of every kind on a broken archive or manifest
        raise DataError(f"{path} is a damaged EPUB ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}): "
                        f"export it again, or give the book as plain text") from None
    titles = _toc_titles(book.toc)
    chapters = []
    for idref, *_ in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ITEM_DOCUMENT:
            continue
        text = html_text(item.get_content().decode("utf-8", errors="replace"))
        heading = titles.get(item.get_name())
        if heading and not text.lower().startswith(heading.strip().lower()[:40]):
            text = f"{heading.strip()}\n\n{text}" if text else ""
        if text.strip():
            chapters.append(text)
    if not chapters:
        raise DataError(f"{path} holds no text (an EPUB of images, or empty): give a book with text")
    title = (book.get_metadata("DC", "title") or [("",)])[0][0].strip()
    return "\n\n".join(([title] if title and not chapters[0].startswith(title) else []) + chapters)
