"""An OpenAI-compatible server as the reader (whoqa.llm.server): llama-cpp-python's own server started on 127.0.0.1
with the shipped 0.5B, asked a Who and an other question through `whoqa ask --llm URL`; a server that is down is one
line naming its address."""
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from typer.testing import CliRunner

from tests.test_any_book import STORY as LIGHTHOUSE

pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's server (pip install -e '.[llama]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    from whoqa.llm.models import llm_installed
    from whoqa.llm.reader import joined_model
    if not llm_installed("qwen2.5-coder-0.5b"):
        pytest.skip("the shipped 0.5B is not installed (bash install.sh)")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(joined_model("qwen2.5-coder-0.5b")),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--logits_all", "true",
                             "--n_threads", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url + "/models", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("llama-cpp-python's server exited before answering")
                time.sleep(0.5)
        else:
            pytest.fail("llama-cpp-python's server did not answer in 120 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_ask_answers_a_who_and_an_other_question_through_a_server(server, tmp_path):
    from cli import app
    from whoqa.llm.server import ServerReader
    reader = ServerReader(server)
    assert reader.scores  # llama-cpp-python with logits_all gives the prompt's log-probabilities
    a, b = reader.name_scores("Who rowed?", ["Tom rowed to the village."], ["Tom", "the lighthouse keeper's cat"])
    assert a < 0 and b < 0 and a != b
    book = tmp_path / "l.txt"
    book.write_text(LIGHTHOUSE)
    run = CliRunner().invoke
    who = run(app, ["ask", "--workspace", str(tmp_path / "ws"), "--llm", server, "--json", str(book),
                    "Who rowed to the village for bread?"])
    assert who.exit_code == 0, who.output
    import json
    got = json.loads(who.output[who.output.index("{"):])
    assert got["characters"] and server.split("//")[1].split("/")[0].replace(":", "-") in got["model"].replace(":", "-")
    assert all(c["probability"] is None for c in got["characters"])  # an unmeasured reader: no probability
    other = run(app, ["ask", "--workspace", str(tmp_path / "ws"), "--llm", server, "--json", str(book),
                      "What did the keeper carry back from the village?"])
    assert other.exit_code == 0, other.output
    got = json.loads(other.output[other.output.index("{"):])
    assert got["kind"] == "reader" and (got["answer"] or got["withheld"])


def test_a_server_that_is_down_is_one_line_naming_its_address(tmp_path):
    from cli import app
    book = tmp_path / "l.txt"
    book.write_text(LIGHTHOUSE)
    url = f"http://127.0.0.1:{_free_port()}/v1"
    out = CliRunner().invoke(app, ["ask", "--workspace", str(tmp_path / "ws"), "--llm", url, str(book),
                                   "What did the keeper carry back from the village?"])
    assert out.exit_code != 0
    lines = [l for l in out.output.splitlines() if l.strip()]
    assert any(f"no reader answers at {url}" in l for l in lines) and "Traceback" not in out.output, out.output


def test_measure_reader_writes_a_fit_for_a_server_that_ask_then_uses(server, tmp_path):
    """`whoqa measure-reader --llm URL` chooses through the server's log-probabilities on readers' questions and
    writes that server's fit; `ask --llm URL` then answers Who questions with probabilities from it."""
    import json
    from cli import app
    from tests.test_measure_reader import QUESTIONS, write_books
    books, questions, split = write_books(tmp_path)
    ws = str(tmp_path / "ws")
    run = CliRunner().invoke
    got = run(app, ["measure-reader", "--llm", server, "--workspace", ws, "--questions", str(questions), "--books",
                    str(books), "--split", str(split), "--limit", "1"])  # (a name a request, the whole prompt read each time)
    assert got.exit_code == 0, got.output
    who = run(app, ["ask", "--workspace", ws, "--llm", server, "--json", str(books / "lighthouse.txt"),
                    QUESTIONS[0][1]])
    assert who.exit_code == 0, who.output
    answer = json.loads(who.output[who.output.index("{"):])
    assert "choosing among" in answer["model"] and all(c["probability"] for c in answer["characters"])
