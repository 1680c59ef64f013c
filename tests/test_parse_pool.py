"""One book's parse across processes (data_prep.parse_pool, issue 54): the same Parsed and the same book files, byte
for byte, as one process, whatever the hash seed; a part that fails or whose process is killed is one error line and
no book.
The batches a forked process parses depend on the machine's load; the tests here check the result never does."""
import json
import os
import signal
import subprocess
import sys
import time
from copy import copy
from dataclasses import astuple
from pathlib import Path

import pytest

from data_prep import parse_pool
from data_prep.parse import paragraphs, parse_text
from data_prep.parse_pool import ParseFailed, count, join, parse_book
from tests.conftest import DYING_DETECTIVE

ROOT = Path(__file__).resolve().parents[1]
BATCH = 16  # small batches, so a short real book has several to cut between


def test_how_many_processes():
    long = [(0, "word " * 20_000)] * 40
    assert count(1, long, 8) == 1 and count(3, long, 8) == 3 and count(9, long, 8) == 5  # never more than batches
    assert count(0, [(0, "A short story.")] * 300, 8) == 1  # auto: too little text to fork for
    assert count(0, long, 8) == min(parse_pool.usable_cores(), 5) if sys.platform.startswith("linux") else 1


def test_join_shifts_the_ids_past_the_parts_before():
    from data_prep.parse import Entity, Parsed
    from whoqa.core.book import Token

    def part(paragraph, n):  # n tokens in one sentence, headed by its first; one entity over them all
        return Parsed([Token(paragraph, 0, i, "w", "w", 0, 1, "X", "X", "dep", 0) for i in range(n)],
                      [Entity(0, n - 1, "PERSON")])
    got = join([part(0, 2), Parsed([], []), part(1, 3)])
    assert [(t.paragraph, t.sentence, t.index, t.head) for t in got.tokens] == [
        (0, 0, 0, 0), (0, 0, 1, 0), (1, 1, 2, 2), (1, 1, 3, 2), (1, 1, 4, 2)]
    assert [(e.start, e.end) for e in got.entities] == [(0, 1), (2, 4)]


@pytest.fixture(scope="module")
def story(shared_data) -> str:
    from data_prep.narrativeqa import NarrativeQA
    return NarrativeQA(shared_data).book_text(DYING_DETECTIVE)


def _book_files(engine, parsed, folder: Path) -> dict[str, bytes]:
    from whoqa.core.book import write_book_files
    out = engine.process_parsed(parsed)
    write_book_files(folder, "b", out.token_rows, out.entity_rows, out.book)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_and_three_processes_make_the_same_parse_and_book_files_as_one(engine, story, tmp_path):
    assert len(paragraphs(story)) > 4 * BATCH
    ticks = {}
    parsed, files = {}, {}
    for n in (1, 2, 3):
        ticks[n] = []
        parsed[n] = parse_book(engine.nlp, story, BATCH, n, ticks[n].append)
        files[n] = _book_files(engine, parsed[n], tmp_path / str(n))
    assert len(parsed[1].tokens) > 5000 and parsed[1].entities
    assert parsed[2] == parsed[1] and parsed[3] == parsed[1]
    assert sorted(files[1]) == ["b.book", "b.entities", "b.tokens"]
    assert files[2] == files[1] and files[3] == files[1]
    assert sum(ticks[2]) == sum(ticks[3]) == sum(ticks[1])  # the progress bar fills once, whatever the processes
    slowed = parse_book(_Failing(engine.nlp, "slow"), story, BATCH, 2)  # the forked process
    assert slowed == parsed[1]  # takes few batches (one, maybe two) and this one the rest: the same parse


def test_the_engine_parses_across_processes_when_told(engine, story, monkeypatch):
    one = engine.process_text(story)
    monkeypatch.setattr(engine, "processes", 2)
    monkeypatch.setattr(engine, "batch_size", BATCH)
    calls = []
    real = parse_pool.parse_across
    monkeypatch.setattr(parse_pool, "parse_across", lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    two = engine.process_text(story)
    assert calls == [2]
    assert (two.token_rows, two.entity_rows, two.book) == (one.token_rows, one.entity_rows, one.book)


_IN_A_CHILD = """
import json, sys
from dataclasses import astuple
from data_prep.narrativeqa import NarrativeQA
from data_prep.parse_pool import parse_book
from whoqa.core.lexicon import load_nlp
p = parse_book(load_nlp(), NarrativeQA(sys.argv[1]).book_text(sys.argv[2]), int(sys.argv[3]), 2)
print(json.dumps([[astuple(t) for t in p.tokens], [astuple(e) for e in p.entities]]))
"""


def test_another_hash_seed_parses_the_same(engine, story, shared_data):
    """The hash seed plays no part: 2 processes under another PYTHONHASHSEED give this process's one-process parse."""
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _IN_A_CHILD, str(shared_data), DYING_DETECTIVE, str(BATCH)],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True).stdout
    tokens, entities = json.loads(out.strip().splitlines()[-1])
    here = parse_text(engine.nlp, story, batch_size=BATCH)
    assert tokens == [list(astuple(t)) for t in here.tokens]
    assert entities == [list(astuple(e)) for e in here.entities]


class _Failing:
    """spaCy's pipeline, failing in every forked process (`how`: raise, kill the process, or slow: a second per
    batch) and working in this one."""

    def __init__(self, nlp, how: str):
        self.nlp, self.how, self.parent = nlp, how, os.getpid()

    def pipe(self, texts, batch_size):
        if os.getpid() != self.parent:
            if self.how == "slow":
                time.sleep(1.0)
                return self.nlp.pipe(texts, batch_size=batch_size)
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError("the model file is damaged\nsecond line")
        return self.nlp.pipe(texts, batch_size=batch_size)


@pytest.mark.parametrize("how, says", [("raise", "parsing the book failed in parse process 1 (ValueError: the model "
                                                  "file is damaged), so the book was not made"),
                                       ("kill", "parse process 1 died (exit code -9: killed, or out of memory), so the "
                                                "book was not made")])
def test_a_failing_or_killed_part_is_one_line_and_no_book(engine, story, tmp_path, how, says):
    from data_prep.addbook import add_text
    from whoqa.core.workspace import Workspace
    failing = copy(engine)
    failing.nlp, failing.processes, failing.batch_size = _Failing(engine.nlp, how), 2, BATCH
    book = tmp_path / "story.txt"
    book.write_text(story)
    with pytest.raises(ParseFailed) as err:
        add_text(tmp_path / "ws", book, engine=failing)
    msg = str(err.value)
    assert msg == says, msg
    books = Workspace(tmp_path / "ws").books
    assert not books.exists() or not any(books.iterdir())  # nothing half-made
    assert not [p for p in parse_pool.mp.active_children() if p.name.startswith("whoqa-parse")]  # none left behind


def test_prepare_text_says_one_line_when_a_parse_process_is_killed(tmp_path, monkeypatch):
    """The command line: `whoqa prepare --text` whose second parse process is killed exits 2 with one error line."""
    from typer.testing import CliRunner

    from cli import app

    def killed(*args):
        os.kill(os.getpid(), signal.SIGKILL)
    monkeypatch.setattr(parse_pool, "_child", killed)  # (forked children run the parent's memory)
    book = tmp_path / "story.txt"
    book.write_text("\n\n".join(f"Anna Pellow lit the lamp on night {k}. Tom Pellow rowed home." for k in range(300)))
    r = CliRunner().invoke(app, ["prepare", "--text", str(book), "--workspace", str(tmp_path / "ws"),
                                 "--parse-processes", "2"])
    assert r.exit_code == 2, r.output
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "parse process 1 died (exit code -9" in errors[0], r.output
    assert not any((tmp_path / "ws" / "books").glob("*/*.book"))


@pytest.mark.parametrize("jobs, setting, books_get", [(2, 0, ("pool", 1)), (2, 3, ("pool", 3)), (1, 0, ("here", 0))])
def test_books_side_by_side_parse_each_in_one_process(mini_data, tmp_path, monkeypatch, jobs, setting, books_get):
    """`prepare --jobs 2` already fills the cores with books: auto then parses each book in its own one process; one
    book at a time keeps auto (and a count given is kept either way)."""
    import data_prep.prepare as prep
    from data_prep.config import PrepareConfig
    seen = []
    monkeypatch.setattr(prep, "hash_seed_fixed", lambda: True)
    monkeypatch.setattr(prep, "pooled", lambda fn, args, n, init, initargs: seen.append(("pool", initargs[0])) or [])
    monkeypatch.setattr(prep, "init_worker", lambda cfg: seen.append(("here", cfg)))
    monkeypatch.setattr(prep, "work_book", lambda data, b, out: (b, None, "not made here"))
    cfg = PrepareConfig(str(mini_data), str(tmp_path / "ws"), jobs=jobs, parse_processes=setting, who_set=False,
                        artificial=False, embeddings=False)
    prep.prepare(cfg, progress=False)
    assert [(where, c.parse_processes) for where, c in seen] == [books_get]
