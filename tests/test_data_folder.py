"""`whoqa serve` and `whoqa ask` keep books in one place (issue 66): serve with no flag serves ask's data folder and
makes it when missing; `ask --out` into a folder writes the answer inside it."""
import json

from typer.testing import CliRunner

from cli import app
from tests.test_any_book import STORY

run = CliRunner().invoke


def test_serve_with_no_flag_serves_asks_data_folder_and_makes_it(monkeypatch, tmp_path):
    import whoqa.web.app as web
    served = []
    monkeypatch.setattr(web, "serve", lambda cfg: served.append(cfg))
    home = tmp_path / "new-user" / "whoqa"
    monkeypatch.setenv("WHOQA_HOME", str(home))
    r = run(app, ["serve"])
    assert r.exit_code == 0, r.output
    assert served[0].workspace == str(home) and home.is_dir()
    r = run(app, ["serve", "--read-only", "--workspace", str(tmp_path / "missing")])
    assert r.exit_code != 0 and "not found" in r.output and not (tmp_path / "missing").exists()


def test_the_page_and_ask_share_the_books(monkeypatch, tmp_path):
    from whoqa.web.app import Library, ServeConfig
    monkeypatch.setenv("WHOQA_HOME", str(tmp_path / "home"))
    (tmp_path / "lighthouse.txt").write_text(STORY)
    r = run(app, ["ask", str(tmp_path / "lighthouse.txt"), "Who lit the lamp?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    books = Library(ServeConfig(llm="none")).books()  # no workspace named: ask's
    assert len(books) == 1 and books[0]["characters"] >= 2


def test_ask_out_to_a_folder_writes_inside_it(monkeypatch, tmp_path):
    monkeypatch.setenv("WHOQA_HOME", str(tmp_path / "home"))
    (tmp_path / "lighthouse.txt").write_text(STORY)
    (tmp_path / "answers").mkdir()
    r = run(app, ["ask", str(tmp_path / "lighthouse.txt"), "Who lit the lamp?", "--llm", "none",
                  "--out", str(tmp_path / "answers")])
    assert r.exit_code == 0, r.output
    (written,) = (tmp_path / "answers").iterdir()
    assert written.name.endswith("-who-lit-the-lamp.json")
    assert json.loads(written.read_text())["question"] == "Who lit the lamp?"
