"""PDF and Kindle books (issue 66): read in reading order without running heads and page numbers, hyphenated words
joined, chapters kept for --upto; the same book as text, PDF and MOBI gives the same cast and the same answers; a
scanned, password-protected, DRM-protected or damaged file is one line and leaves nothing behind. The files are made
here (tests/ebooks.py)."""
import re

import pytest
from typer.testing import CliRunner

from cli import app
from tests.conftest import DYING_DETECTIVE
from tests.ebooks import make_mobi, make_pdf
from tests.test_any_book import _ranking
from tests.test_pipeline import QUESTIONS
from whoqa.core.errors import DataError
from whoqa.core.kindle import read_kindle
from whoqa.core.pdf import _paragraphs, read_pdf
from whoqa.core.text import extract_body, read_book_text

run = CliRunner().invoke
LIGHTHOUSE = [("CHAPTER I", "Anna Pellow kept the lighthouse on the rock with her brother Tom. " * 30
               + "\n\nEvery night Anna climbed the stairs and lit the great lamp."),
              ("CHAPTER II", "One stormy night Tom rowed out and pulled a sailor named Jacob Trewin from the sea. " * 30
               + "\n\nAnna gave Jacob soup.")]


def test_a_pdf_reads_as_its_text_without_heads_and_page_numbers(tmp_path):
    text = read_pdf(make_pdf(tmp_path / "l.pdf", LIGHTHOUSE))
    assert "THE LIGHTHOUSE" not in text  # the running head on every page
    assert not re.search(r"^\d+$", text, re.M)  # page numbers
    assert text.index("CHAPTER I\n") < text.index("Anna Pellow") < text.index("CHAPTER II\n") < text.index("Jacob")
    assert "\n\nEvery night Anna climbed" in text and "\n\nAnna gave Jacob soup." in text  # paragraphs kept
    assert "brother Tom. Anna Pellow" in text  # lines of one paragraph joined
    assert read_book_text(tmp_path / "l.pdf") == text
    (tmp_path / "renamed.txt").write_bytes((tmp_path / "l.pdf").read_bytes())
    assert read_book_text(tmp_path / "renamed.txt") == text  # a PDF by its header, whatever its name


def test_words_hyphenated_across_lines_are_joined():
    lines = ["It was a long and weary journey, and they remem-", "bered it for years; a well-",
             "known road led home over the hills and far away.", "CHAPTER III", "A well-known face."]
    assert _paragraphs(lines) == ("It was a long and weary journey, and they remembered it for years; a well-known road "
                                  "led home over the hills and far away.\n\nCHAPTER III\n\nA well-known face.")
    # (a compound keeps its hyphen where the book writes it so inside a line too)


def test_scanned_protected_and_damaged_pdfs_are_refused(tmp_path):
    from fpdf import FPDF
    scan = FPDF()
    for _ in range(3):
        scan.add_page()
        scan.rect(10, 10, 100, 100, style="F")  # a page of pixels: no text layer
    scan.output(str(tmp_path / "scan.pdf"))
    with pytest.raises(DataError, match="no text layer.*OCR"):
        read_pdf(tmp_path / "scan.pdf")
    locked = FPDF()
    locked.set_encryption(owner_password="owner", user_password="secret")
    locked.add_page()
    locked.set_font("Helvetica", size=11)
    locked.multi_cell(0, 5, "Anna Pellow kept the lighthouse. " * 40)
    locked.output(str(tmp_path / "locked.pdf"))
    with pytest.raises(DataError, match="password-protected"):
        read_pdf(tmp_path / "locked.pdf")
    (tmp_path / "junk.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 200)
    with pytest.raises(DataError, match="PDF"):
        read_pdf(tmp_path / "junk.pdf")


def test_a_mobi_reads_as_the_html_it_holds_and_a_drm_one_is_refused(tmp_path):
    html = ("<html><head><title>The Lighthouse</title></head><body><h1>Chapter 1</h1><p>Anna Pellow kept the "
            "lighthouse.</p><h1>Chapter 2</h1><p>Tom rowed out to Jacob Trewin.</p></body></html>")
    text = read_kindle(make_mobi(tmp_path / "l.mobi", html, "The Lighthouse"))
    assert text == "Chapter 1\n\nAnna Pellow kept the lighthouse.\n\nChapter 2\n\nTom rowed out to Jacob Trewin."
    assert read_book_text(tmp_path / "l.mobi") == text
    with pytest.raises(DataError, match="DRM-protected"):
        read_kindle(make_mobi(tmp_path / "drm.azw3", html, encrypted=True))
    (tmp_path / "junk.mobi").write_bytes(b"nothing like a palm database" * 10)
    with pytest.raises(DataError, match="not a Kindle book"):
        read_kindle(tmp_path / "junk.mobi")


def _same_book(shared_data, tmp_path):
    """The Dying Detective as text, and as a PDF and a MOBI made from its paragraphs."""
    text = extract_body(read_book_text(shared_data / "books" / f"{DYING_DETECTIVE}.txt"))
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    (tmp_path / "book.txt").write_text("\n\n".join(paragraphs) + "\n")
    make_pdf(tmp_path / "book.pdf", [(paragraphs[0], "\n\n".join(paragraphs[1:]))], running_head="HIS LAST BOW")
    html = "".join(f"<p>{p.replace('&', '&amp;').replace('<', '&lt;')}</p>" for p in paragraphs)
    make_mobi(tmp_path / "book.mobi", f"<html><body>{html}</body></html>", "The Dying Detective")
    return [tmp_path / f"book.{s}" for s in ("txt", "pdf", "mobi")]


@pytest.mark.integration
def test_a_pdf_and_a_mobi_give_the_texts_cast_and_answers(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("WHOQA_HOME", str(tmp_path / "home"))
    files = _same_book(shared_data, tmp_path)
    answers = {}
    for f in files:
        got = []
        for q, *_ in QUESTIONS[:4]:
            r = run(app, ["ask", str(f), q, "--llm", "none"])
            assert r.exit_code == 0, r.output
            got.append([l.split(None, 1)[1].strip() for l in _ranking(r.output)][:3])
        answers[f.suffix] = got
    assert answers[".pdf"] == answers[".txt"] and answers[".mobi"] == answers[".txt"], answers
    from whoqa.core.book import Book
    from whoqa.core.workspace import Workspace
    from whoqa.ranker.cast import cast_of
    ws = Workspace(tmp_path / "home")
    casts = {b.name: sorted(cast_of(Book.load(b, b.name)).names.values()) for b in ws.books.iterdir() if b.is_dir()}
    # the MOBI's text is the text file's exactly; the PDF's paragraphs differ, yet it is the same book in another
    # format (its shingles: whoqa.core.text.same_text), so it is answered by the one kept
    assert len(casts) == 1, casts
    (cast,) = casts.values()
    assert len(cast) >= 5, casts
