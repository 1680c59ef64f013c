"""`whoqa download` against a small mirror served on 127.0.0.1."""
import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from data_prep.download import DownloadConfig, download
from data_prep.narrativeqa import NarrativeQA


@pytest.fixture
def mirror(tmp_path):
    site = tmp_path / "site"
    (site / "third_party" / "wikipedia").mkdir(parents=True)
    (site / "ebooks").mkdir()
    books = {"a" * 40: "*** START OF THIS PROJECT GUTENBERG EBOOK A ***\n\nAnna sold her house.\n\n"
                       "*** END OF THIS PROJECT GUTENBERG EBOOK A ***\n",
             "b" * 40: "Bob ran.\n"}
    for bid, text in books.items():
        (site / "ebooks" / f"{bid}.txt").write_text(text)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SimpleHTTPRequestHandler, directory=str(site)))
    base = f"http://127.0.0.1:{server.server_port}"
    rows = ["document_id,set,kind,story_url,story_file_size,wiki_url,wiki_title,story_word_count,story_start,story_end"]
    rows.append(f"{'a' * 40},test,gutenberg,{base}/ebooks/{'a' * 40}.txt,{len(books['a' * 40])},,A,4,,")
    rows.append(f"{'b' * 40},train,gutenberg,{base}/ebooks/{'b' * 40}.txt,999,,B,2,,")  # wrong size on purpose
    rows.append(f"{'c' * 40},test,gutenberg,{base}/ebooks/missing.txt,10,,C,2,,")
    rows.append(f"{'d' * 40},test,movie,{base}/ebooks/movie.html,10,,D,2,,")
    (site / "documents.csv").write_text("\n".join(rows) + "\n")
    (site / "qaps.csv").write_text("document_id,set,question,answer1,answer2\n" + f"{'a' * 40},test,Who?,Anna,Anna\n")
    (site / "third_party" / "wikipedia" / "summaries.csv").write_text("document_id,set,summary\n")
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield base
    server.shutdown()


def test_download_builds_layout_resumes_and_checks_sizes(mirror, tmp_path):
    data = tmp_path / "nqa"
    rep = download(DownloadConfig(str(data), csv_base_url=mirror, retries=0, timeout=5))
    assert sorted(rep["fetched"]) == ["a" * 40, "b" * 40]
    assert list(rep["failed"]) == ["c" * 40] and "404" in rep["failed"]["c" * 40]
    assert list(rep["size_mismatch"]) == ["b" * 40]
    assert "d" * 40 not in rep["fetched"]  # movies only with --kind movie/all
    nqa = NarrativeQA(data)
    assert nqa.book_text("a" * 40) == "Anna sold her house.\n"
    assert len(nqa.questions()) == 1
    assert not list(data.rglob("*.part"))
    rep2 = download(DownloadConfig(str(data), csv_base_url=mirror, retries=0, timeout=5))
    assert rep2["fetched"] == [] and sorted(rep2["already_there"]) == ["a" * 40, "b" * 40]


def test_unreachable_source_is_a_clear_error(tmp_path):
    from whoqa.core.text import DataError
    with pytest.raises(DataError, match="could not fetch"):
        download(DownloadConfig(str(tmp_path / "x"), csv_base_url="http://127.0.0.1:9", retries=0, timeout=2))


def test_unknown_book_id_is_a_clear_error(mirror, tmp_path):
    from typer.testing import CliRunner
    from cli import app
    res = CliRunner().invoke(app, ["download", "--data", str(tmp_path / "nqa"), "--csv-base-url", mirror,
                                   "--book", "f" * 40])
    assert res.exit_code == 2 and "not in documents.csv" in res.output
