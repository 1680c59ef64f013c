"""A damaged workspace: each kind of damaged artifact ends a command in one line naming the file and its repair
(exit 2, no traceback), and derived caches (a book's Lucene index, its memory arrays) are rebuilt instead."""
import json
import shutil

import pytest
from typer.testing import CliRunner

from cli import app
from tests.conftest import DYING_DETECTIVE
from tests.test_any_book import trained  # noqa: F401  (the module's trained workspace fixture)

run = CliRunner().invoke
Q = "Who poisons Holmes with a box?"


@pytest.fixture
def ws(trained, tmp_path):  # noqa: F811
    _, ws = trained
    shutil.copytree(ws, tmp_path / "ws")
    return tmp_path / "ws"


def _ask(ws):
    return run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, Q, "--route", "network"])


def _one_line(r, *words):
    lines = [l for l in r.output.strip().splitlines() if l.strip()]
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and len(lines) == 1, r.output
    assert all(w in lines[0] for w in words), lines[0]


def test_truncated_word_vectors(ws):
    path = ws / "embeddings" / "word2vec.model"
    path.write_bytes(path.read_bytes()[:200])
    _one_line(_ask(ws), "word2vec.model", "damaged", "--rebuild-vectors")
    _one_line(run(app, ["train", "--workspace", str(ws), "--final", "--epochs", "1"]), "word2vec.model", "damaged")


def test_a_book_that_fails_to_fold_in_leaves_the_artificial_report_as_it_was(ws, tmp_path):
    """`ask --text` of a new book with damaged word vectors: one line, the book removed, and
    artificial/report.json byte for byte as before (its questions were counted before the fold failed)."""
    report = ws / "artificial" / "report.json"
    before = report.read_bytes()
    vectors = ws / "embeddings" / "word2vec.model"
    whole = vectors.read_bytes()
    vectors.write_bytes(whole[:200])
    books = sorted(p.name for p in (ws / "books").iterdir())
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(_story(tmp_path)), "Who rowed out?", "--llm", "none"])
    _one_line(r, "word2vec.model", "damaged")
    assert sorted(p.name for p in (ws / "books").iterdir()) == books
    assert report.read_bytes() == before


def test_a_book_taken_in_adds_to_the_artificial_report(ws, tmp_path):
    """The report of the workspace's artificial questions, after `ask --text` of a new book, counts the books it
    counted before and the new one (merged, never replaced by the new book's figures)."""
    import json
    report = ws / "artificial" / "report.json"
    before = json.loads(report.read_text())
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(_story(tmp_path)), "Who rowed out?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    after = json.loads(report.read_text())
    new = set(after["per_book"]) - set(before["per_book"])
    assert len(new) == 1 and after["books"] == before["books"] + 1
    assert after["totals"]["questions"] == before["totals"]["questions"] + after["per_book"][new.pop()]["questions"]


def test_who_set_of_the_wrong_shape(ws):
    (ws / "who" / "who_questions.json").write_text(json.dumps([[1, 2], [3]]))
    _one_line(run(app, ["train", "--workspace", str(ws), "--folds", "2", "--epochs", "1"]), "who_questions.json",
              "whoqa prepare")
    (ws / "who" / "characters.json").write_text("{broken")
    _one_line(run(app, ["eval", "--workspace", str(ws)]), "characters.json", "not valid JSON", "whoqa prepare")


def test_broken_book_json(ws):
    (ws / "books" / DYING_DETECTIVE / f"{DYING_DETECTIVE}.book").write_text('{"characters": [')
    _one_line(_ask(ws), f"{DYING_DETECTIVE}.book", "not valid JSON", f"whoqa prepare --workspace {ws}",
              f"--book {DYING_DETECTIVE}")


def test_damaged_contexts(ws):
    (ws / "contexts" / "bm25f" / f"{DYING_DETECTIVE}.json").write_text("[]")
    _one_line(run(app, ["train", "--workspace", str(ws), "--folds", "2", "--epochs", "1"]),
              f"{DYING_DETECTIVE}.json", "whoqa index")


def test_damaged_caches_are_rebuilt(ws):
    before = _ask(ws)
    assert before.exit_code == 0, before.output
    for f in (ws / "index" / "bm25f" / DYING_DETECTIVE).glob("segments_*"):
        f.write_bytes(b"\0" * 10)  # a Lucene commit point that cannot be read
    for f in (ws / "memdata").rglob("*.npz"):
        f.write_bytes(b"PK\3\4 truncated")
    after = _ask(ws)
    assert after.exit_code == 0, after.output
    ranking = lambda out: [l for l in out.splitlines() if "%" in l[:8]]  # noqa: E731
    assert ranking(after.output) == ranking(before.output)  # the same answer from the rebuilt caches


def test_check_finds_each_damage_and_repair_restores_the_answers(ws):
    before = _ask(ws)
    r = run(app, ["check", "--workspace", str(ws)])
    assert r.exit_code == 0 and "0 damaged" in r.output, r.output
    model = ws / "models" / "memnet+salience[bm25f]" / "members" / "trial1" / "model.pt"
    model.write_bytes(model.read_bytes()[:100])
    run_file = next((ws / "runs" / "memnet+salience[bm25f]").glob("fold0_trial0.json"))
    run_file.write_text('{"fold": 0, "tri')
    (ws / "contexts" / "bm25f" / f"{DYING_DETECTIVE}.json").write_text("{not json")
    r = run(app, ["check", "--workspace", str(ws)])
    assert r.exit_code == 1 and "3 damaged" in r.output, r.output
    for path, repair in ((model, "retrain"), (run_file, "whoqa train"), ("contexts", "whoqa index")):
        line = next(l for l in r.output.splitlines() if str(path) in l)
        nxt = r.output.splitlines()[r.output.splitlines().index(line) + 1]
        assert "damaged" in line and repair in nxt
    r = run(app, ["check", "--workspace", str(ws), "--repair"])
    # the run's fold file and the contexts are moved aside (never deleted); the trained member is only named, and the
    # repair says so with a non-zero exit
    assert r.exit_code == 1 and "moved 2" in r.output and "1 need you" in r.output, r.output
    quarantine = next((ws / "quarantine").iterdir())
    assert (quarantine / "contexts" / "bm25f" / f"{DYING_DETECTIVE}.json").read_text() == "{not json"
    assert (quarantine / run_file.relative_to(ws)).is_file() and model.is_file()
    assert (ws / "models" / "memnet+salience[bm25f]" / "config.json").is_file()  # the ensemble's folder is whole
    _one_line(_ask(ws), "trial1", "retrain")  # a damaged member stops ask: no smaller ensemble in silence
    for cmd in (["index", "--workspace", str(ws), "--jobs", "1"],
                ["train", "--workspace", str(ws), "--folds", "2", "--trials", "2", "--epochs", "3"],
                ["train", "--workspace", str(ws), "--final", "--trials", "2", "--epochs", "3"]):
        assert run(app, cmd).exit_code == 0
    r = run(app, ["check", "--workspace", str(ws), "--repair"])
    assert r.exit_code == 0 and "0 damaged" in r.output, r.output
    after = _ask(ws)
    ranking = lambda out: [l for l in out.splitlines() if "%" in l[:8]]  # noqa: E731
    assert after.exit_code == 0 and ranking(after.output) == ranking(before.output)


def test_check_knows_every_artifact_and_its_reader_says_one_line(ws, tmp_path):
    """Each artifact a stage or the server reads, emptied in turn (a crash or a full disk mid-write): `check` names
    it, and the command that reads it ends with one line naming the file (or, for a cache, remakes it)."""
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(_story(tmp_path)), "Who rowed out?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    assert run(app, ["eval", "--workspace", str(ws)]).exit_code == 0
    from fastapi.testclient import TestClient
    from whoqa.web.app import ServeConfig, create_app
    TestClient(create_app(ServeConfig(workspace=str(ws), warm=False)), base_url="http://127.0.0.1:8000").get("/api/books")
    (ws / "jobs").mkdir(exist_ok=True)
    (ws / "jobs" / f"{'c' * 32}.json").write_text('{"id": "x"}')
    artificial = ws / "artificial" / f"{DYING_DETECTIVE}.jsonl.gz"
    readers = {  # artifact -> the command that reads it (None: a cache remade by its reader)
        ws / "books" / DYING_DETECTIVE / "summary.json": None,
        ws / "jobs" / f"{'c' * 32}.json": None,
        ws / "embeddings" / "state.json": ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, Q, "--route",
                                           "network"],
        ws / "questions.json": ["index", "--workspace", str(ws), "--jobs", "1"],
        artificial: ["pretrain", "--workspace", str(ws)],
        ws / "embeddings" / "vocab.json": None,
        ws / "engine.json": None,
        ws / "texts.json": None,
        ws / "who" / "report.json": None,
        next((ws / "results").glob("*.json")): None,
    }
    for path, command in readers.items():
        saved = path.read_bytes()
        path.write_bytes(b"")
        r = run(app, ["check", "--workspace", str(ws)])
        assert r.exit_code == 1 and f"damaged: {path}" in r.output, (path, r.output)
        if command:
            _one_line(run(app, command), path.name, "damaged")
        path.write_bytes(saved)
    assert run(app, ["check", "--workspace", str(ws)]).exit_code == 0


def _story(tmp_path):
    from tests.test_any_book import STORY
    p = tmp_path / "story.txt"
    p.write_text(STORY)
    return p


def test_a_lock_held_by_a_killed_process_is_taken_over(tmp_path):
    """The workspace lock is an flock: when its holder is killed (kill -9), the kernel releases it, so the next
    command proceeds at once instead of waiting for a process that is gone."""
    import signal
    import subprocess
    import sys
    from pathlib import Path
    from whoqa.core.workspace import locked
    root = Path(__file__).resolve().parents[1]
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom whoqa.core.workspace import locked\n"
                               f"with locked({str(tmp_path)!r}):\n    print('held', flush=True)\n    time.sleep(600)"],
                              cwd=root, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    import fcntl
    import os
    fd = os.open(tmp_path / ".lock", os.O_RDWR)
    with pytest.raises(BlockingIOError):  # held while the holder lives
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free at once: no stale lock is left behind
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    with locked(tmp_path):  # and the next command takes it
        pass


def test_a_damaged_engine_record_is_one_line_for_ask_and_rewritten_by_prepare(ws, tmp_path):
    """WS/engine.json, the record of how the books are made: a damaged one stops `ask --text` (which would make a
    book by it) with one line naming it, and `prepare` writes it again."""
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(_story(tmp_path)), "Who rowed out?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    record = ws / "engine.json"
    saved = record.read_text()
    record.write_text('{"engine": "spa')
    other = tmp_path / "other.txt"
    other.write_text("Mara met Ivo at the mill. Ivo told Mara of the storm, and Mara warned the miller.\n" * 4)
    _one_line(run(app, ["ask", "--workspace", str(ws), "--text", str(other), "Who met Ivo?", "--llm", "none"]),
              "engine.json", "damaged", "whoqa prepare")
    from data_prep.prepare import PrepareConfig, engine_identity, record_engine
    cfg = PrepareConfig(data="", workspace=str(ws))
    record_engine(cfg, engine_identity(cfg))
    assert json.loads(record.read_text()) == json.loads(saved)


def test_gzipped_rows_cut_by_an_interruption_keep_the_rows_before_the_cut(tmp_path):
    """A resumable .jsonl.gz (one gzip member a row, as `whoqa choice-rows` appends them) cut mid-member: the rows
    whole before the cut are read, the rest is asked again; never a traceback."""
    import gzip
    import json
    from whoqa.core.artifacts import read_rows
    path = tmp_path / "rows.jsonl.gz"
    for i in range(4):
        with gzip.open(path, "at", encoding="utf-8") as f:
            f.write(json.dumps({"key": i, "pad": "x" * 200}) + "\n")
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - 60])  # the last member cut inside its deflate stream
    keys = [r["key"] for r in read_rows(path)]
    assert keys[:3] == [0, 1, 2] and len(keys) in (3, 4)
