"""First use: `whoqa ask BOOK "question"` from any folder with nothing else named (issue 54): a default workspace in
the user's data folder, the book processed once, then named by its id."""
import sys

from typer.testing import CliRunner

from cli import app
from tests.test_any_book import STORY, _ranking

run = CliRunner().invoke


def test_the_default_workspace(monkeypatch, tmp_path):
    from whoqa.core.workspace import default_home
    monkeypatch.setenv("WHOQA_HOME", str(tmp_path / "mine"))
    assert default_home() == tmp_path / "mine"
    monkeypatch.delenv("WHOQA_HOME")
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # not installed: XDG's rule
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_home() == tmp_path / "xdg" / "whoqa"


def test_ask_a_book_file_then_its_id_with_nothing_else_named(monkeypatch, tmp_path):
    home = tmp_path / "home"
    monkeypatch.setenv("WHOQA_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lighthouse.txt").write_text(STORY)
    r = run(app, ["ask", "lighthouse.txt", "Who rowed to the village for bread?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    assert {"Tom", "Anna"} <= {l.split(None, 1)[1].strip() for l in _ranking(r.output)}
    (book,) = [p.name for p in (home / "books").iterdir()]
    again = run(app, ["ask", book[:8], "Who rowed to the village for bread?", "--llm", "none"])
    assert again.exit_code == 0 and _ranking(again.output) == _ranking(r.output), again.output
    same = run(app, ["ask", str(tmp_path / "lighthouse.txt"), "Who lit the lamp?", "--llm", "none"])
    assert same.exit_code == 0 and [p.name for p in (home / "books").iterdir()] == [book]  # processed once
    for args, why in ((["nothing-here", "Who?"], "neither a book file"), (["Who lit the lamp?"], "name the book"),
                      (["lighthouse.txt", "Who?", "--book", book], "name the book once")):
        r = run(app, ["ask", *args, "--llm", "none"])
        assert r.exit_code == 2 and why in r.output, r.output


CHAPTERS = """The Lighthouse

CHAPTER I

Anna Pellow kept the lighthouse on the rock with her brother Tom. Every night Anna climbed the stairs and lit the
great lamp, and every morning Tom rowed to the village for bread. Anna sang to Tom while he mended the nets.

CHAPTER II

One stormy night a ship struck the reef. Tom saw the wreck first and woke Anna. They pulled a sailor named Jacob
Trewin out of the sea. Jacob was cold and frightened. Anna gave Jacob soup and dry clothes. In the morning Jacob
thanked Anna and Tom, and Jacob promised to return with gifts from the village.
"""


def test_upto_no_sentence_after_the_cut_reaches_the_answer(monkeypatch, tmp_path, tiny_llm_path):
    """Jacob appears only in Chapter II: asked up to it, he is no candidate, and no evidence or passage comes from
    after the cut; asked about the whole book, he is."""
    import json
    monkeypatch.setenv("WHOQA_HOME", str(tmp_path / "home"))
    book = tmp_path / "chapters.txt"
    book.write_text(CHAPTERS)
    out = tmp_path / "a.json"
    q = "Who did Anna and Tom pull out of the sea?"
    whole = run(app, ["ask", str(book), q, "--llm", "none", "--out", str(out)])
    assert whole.exit_code == 0, whole.output
    assert "Jacob" in {c["name"].split()[0] for c in json.loads(out.read_text())["characters"]}
    for upto in ("Chapter 2", "CHAPTER II", "50%"):
        r = run(app, ["ask", str(book), q, "--llm", "none", "--upto", upto, "--out", str(out)])
        assert r.exit_code == 0, r.output
        ans = json.loads(out.read_text())
        cut = ans["upto"]["sentences"]
        assert 0 < cut < ans["upto"]["of"] and ans["characters"], ans
        assert not any("Jacob" in c["name"] for c in ans["characters"]) and "Jacob" not in r.output
        assert all(e["sentence"] < cut and "Jacob" not in e["text"] for e in ans["evidence"])
    r = run(app, ["ask", str(book), "What did Anna give the sailor?", "--upto", "Chapter 2", "--llm", tiny_llm_path,
                  "--device", "cpu", "--out", str(out)])
    assert r.exit_code == 0, r.output
    ans = json.loads(out.read_text())
    assert ans["route"] == "llm" and ans["passages"] and not any("Jacob" in p or "soup" in p for p in ans["passages"])
    r = run(app, ["ask", str(book), q, "--llm", "none", "--upto", "Chapter 9"])
    assert r.exit_code == 2 and "no line of this book" in r.output


def test_chat_answers_each_question_with_the_book_loaded_once(monkeypatch, tmp_path):
    """`whoqa chat BOOK`: questions from stdin answered in turn by one warm Service (the book opened once), a bad
    question answered with its one line and the chat going on, "quit" or the end of input ending it cleanly."""
    from whoqa import service
    monkeypatch.setenv("WHOQA_HOME", str(tmp_path / "home"))
    book = tmp_path / "chapters.txt"
    book.write_text(CHAPTERS)
    opened = []
    real = service.Service.open
    monkeypatch.setattr(service.Service, "open", lambda self, b, upto=None: opened.append(b) or real(self, b, upto))
    r = run(app, ["chat", str(book), "--llm", "none"],
            input="Who rowed to the village for bread?\n\n   \nWho lit the great lamp?\nquit\nWho is never asked?\n")
    assert r.exit_code == 0, r.output
    assert r.output.count("?") >= 2 and len(_ranking(r.output)) >= 4 and "never asked" not in r.output
    assert len(set(opened)) == 1
    r = run(app, ["chat", str(book), "--llm", "none", "--upto", "Chapter 2"], input="Who did Anna and Tom pull from the sea?")
    assert r.exit_code == 0 and "Jacob" not in r.output and _ranking(r.output), r.output  # the end of input: EOF
    r = run(app, ["chat", str(book), "--llm", "none"], input="\x00\nWho lit the lamp?\n")
    assert r.exit_code == 0 and _ranking(r.output), r.output


def test_a_terminal_sees_progress_before_the_answer_and_only_the_answer_after(tmp_path):
    """`whoqa bench terminal`: `ask` run in a pseudo-terminal, as a person runs it. Its first visible output is a
    stage line, long before the answer; the stages of a new book are shown in order (reading it, the characters,
    ...); the lines that stay are the answer's, with no library noise among them. (Timings are printed by the
    benchmark, never asserted.)"""
    from whoqa.evaluation.bench import run_terminal
    (tmp_path / "lighthouse.txt").write_text(STORY)
    out = run_terminal(str(tmp_path / "lighthouse.txt"), "Who rowed to the village for bread?",
                       workspace=str(tmp_path / "home"), args=["--llm", "none"])
    assert out["exit"] == 0, out
    names = [s["stage"] for s in out["stages"]]
    assert names and out["first_visible_s"] <= out["stages"][0]["at_s"] < out["answer_at_s"], out
    assert any("read" in n for n in names) and any("character" in n for n in names), names
    assert any("Tom" in line or "Anna" in line for line in out["output"]), out["output"]
    noisy = ("Failed to load", "warn", "Warning", "Traceback", "libcudart", "INFO")
    assert not [line for line in out["output"] if any(w in line for w in noisy)], out["output"]


def test_the_stage_is_known_without_a_terminal():
    """Stages draws only on a terminal, but says the stage under way to anyone who asks (the page), with a percent
    where the amount of work is known; between stages, none."""
    from whoqa.core.progress import Stages
    s = Stages(on=False)
    assert s.now() is None
    advance = s.stage("finding the characters", total=200, unit="word")
    advance(50)
    assert s.now() == {"stage": "finding the characters", "percent": 25}
    s.stage("answering")
    advance(150)  # a finished stage's bar no longer counts
    assert s.now() == {"stage": "answering"}
    s.done()
    assert s.now() is None
