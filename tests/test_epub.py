"""EPUB and HTML books (issue 54): read in the spine's order with their chapter titles, asked about like a text file;
a DRM-protected, damaged or empty EPUB is one line and leaves nothing in the workspace. The EPUBs are built here."""
import zipfile

import pytest
from typer.testing import CliRunner

from cli import app
from whoqa.core.epub import read_epub, read_html
from whoqa.core.text import DataError
from tests.test_any_book import _ranking

run = CliRunner().invoke
CHAPTERS = [("Chapter 1", "<h1>Chapter 1</h1><p>Anna Pellow kept the lighthouse with her brother Tom. Every night "
                          "Anna lit the great lamp.</p><p>Tom didn't sleep; Tom's boat was ready.</p>"),
            ("Chapter 2", "<p>One stormy night Tom rowed out and pulled a sailor named Jacob Trewin from the sea. "
                          "Anna gave Jacob soup.</p><script>var x = 1;</script>")]


def make_epub(path, chapters=CHAPTERS, title="The Lighthouse"):
    from ebooklib import epub
    book = epub.EpubBook()
    book.set_identifier("lighthouse-1")
    book.set_title(title)
    book.set_language("en")
    items = []
    for i, (name, html) in enumerate(chapters, 1):
        c = epub.EpubHtml(title=name, file_name=f"part_{len(chapters) - i}.xhtml", lang="en")  # names against order
        c.content = f"<html><head><title>{name}</title></head><body>{html}</body></html>"
        book.add_item(c)
        items.append(c)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = items  # the spine's order, not the files' names, is the reading order
    epub.write_epub(str(path), book)
    return path


def with_encryption(path, algorithm):
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("META-INF/encryption.xml", f"""<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
 <enc:EncryptedData><enc:EncryptionMethod Algorithm="{algorithm}"/>
  <enc:CipherData><enc:CipherReference URI="EPUB/part_1.xhtml"/></enc:CipherData></enc:EncryptedData>
</encryption>""")
    return path


def test_the_text_in_reading_order_with_its_chapter_titles(tmp_path):
    text = read_epub(make_epub(tmp_path / "b.epub"))
    assert text.index("The Lighthouse") < text.index("Chapter 1") < text.index("Anna Pellow") \
        < text.index("Chapter 2") < text.index("Jacob Trewin")  # chapter 2's title from the table of contents
    assert "var x" not in text and "Tom didn't sleep; Tom's boat" in text
    assert "\n\nTom didn't" in text  # paragraphs stay paragraphs
    html = tmp_path / "b.html"
    html.write_text("<html><head><style>p {}</style></head><body><h2>Chapter 1</h2><p>Anna &amp; Tom.</p></body></html>")
    assert read_html(html) == "Chapter 1\n\nAnna & Tom."


def test_drm_damaged_and_empty_epubs_are_refused(tmp_path):
    drm = with_encryption(make_epub(tmp_path / "drm.epub"), "http://www.w3.org/2001/04/xmlenc#aes128-cbc")
    with pytest.raises(DataError, match="DRM-protected"):
        read_epub(drm)
    fonts = with_encryption(make_epub(tmp_path / "fonts.epub"), "http://www.idpf.org/2008/embedding")
    assert "Jacob" in read_epub(fonts)  # font obfuscation is not DRM
    junk = tmp_path / "junk.epub"
    junk.write_bytes(b"not a zip at all" * 100)
    with pytest.raises(DataError, match="not an EPUB"):
        read_epub(junk)
    broken = tmp_path / "broken.epub"
    with zipfile.ZipFile(broken, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
    with pytest.raises(DataError, match="damaged EPUB"):
        read_epub(broken)
    with pytest.raises(DataError, match="holds no text"):
        read_epub(make_epub(tmp_path / "empty.epub", [("Cover", "<div><img src='x.png'/></div>")], title=""))


def test_ask_an_epub_and_refuse_a_drm_one_leaving_nothing(monkeypatch, tmp_path):
    home = tmp_path / "home"
    monkeypatch.setenv("WHOQA_HOME", str(home))
    book = make_epub(tmp_path / "lighthouse.epub")
    r = run(app, ["ask", str(book), "Who pulled the sailor from the sea?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    assert {"Tom", "Anna"} <= {l.split(None, 1)[1].strip() for l in _ranking(r.output)}
    r = run(app, ["ask", str(book), "Who lit the lamp?", "--llm", "none", "--upto", "Chapter 2"])
    assert r.exit_code == 0 and "Jacob" not in r.output, r.output
    r = run(app, ["ask", str(book), "Whose boat was ready?", "--llm", "none"])  # evidence spaced as the book is
    assert r.exit_code == 0 and "  | Tom didn't sleep; Tom's boat was ready." in r.output, r.output
    before = sorted(p.name for p in (home / "books").iterdir())
    drm = with_encryption(make_epub(tmp_path / "drm.epub", title="Locked"), "http://ns.adobe.com/adept")
    for bad in (drm, tmp_path / "junk.epub"):
        if not bad.exists():
            bad.write_bytes(b"\x00junk" * 50)
        r = run(app, ["ask", str(bad), "Who lit the lamp?", "--llm", "none"])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
        r = run(app, ["prepare", "--workspace", str(home), "--text", str(bad)])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert sorted(p.name for p in (home / "books").iterdir()) == before  # nothing left behind


def test_the_page_takes_an_epub_upload_and_answers_up_to_a_chapter(tmp_path):
    import time
    from whoqa.web.app import ApiError, Library, ServeConfig
    svc = Library(ServeConfig(workspace=str(tmp_path / "ws"), llm="none"))
    job = svc.upload("lighthouse.epub", make_epub(tmp_path / "l.epub").read_bytes())
    for _ in range(600):
        job = svc.job(job["id"])
        if job["state"] in ("done", "failed"):
            break
        time.sleep(0.2)
    assert job["state"] == "done", job
    ans = svc.ask(job["book"], "Who did Anna give soup to?", upto="Chapter 2")
    assert ans["upto"]["sentences"] < ans["upto"]["of"] and ans["why"]
    assert all("Jacob" not in c["name"] for c in ans["characters"])
    drm = with_encryption(make_epub(tmp_path / "d.epub"), "http://ns.adobe.com/adept")
    with pytest.raises(ApiError, match="DRM"):
        svc.upload("locked.epub", drm.read_bytes())
    assert [p.name for p in (tmp_path / "ws" / "uploads").iterdir()] == [f"{job['book']}.epub"]  # nothing else
