"""The whole Who chain on a real short story: prepare -> index -> pretrain -> train -> eval, from the CLI."""
import json

from typer.testing import CliRunner

from cli import app
from tests.conftest import DYING_DETECTIVE, write_qaps

QUESTIONS = [("Who pretends to be dying?", "Sherlock Holmes", "Holmes"),
             ("Who is sent to fetch Culverton Smith?", "Watson", "Dr. Watson"),
             ("Who tells Watson that Holmes is dying?", "Mrs. Hudson", "Mrs Hudson"),
             ("Who wants Holmes to die?", "Culverton Smith", "Smith"),
             ("Who hides behind the head of the bed?", "Watson", "Dr. Watson"),
             ("Who arrests Smith?", "Inspector Morton", "Morton"),
             ("Whose nephew did Smith kill?", "Victor Savage", "Savage")]


def test_who_chain_from_the_cli(mini_data, tmp_path):
    write_qaps(mini_data, [(DYING_DETECTIVE, *q) for q in QUESTIONS])
    ws = str(tmp_path / "ws")
    run = CliRunner().invoke
    r = run(app, ["prepare", "--data", str(mini_data), "--workspace", ws, "--book", DYING_DETECTIVE, "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert "artificial questions:" in r.output and "word2vec:" in r.output
    r = run(app, ["train", "--workspace", ws, "--folds", "2", "--trials", "1", "--epochs", "2"])
    assert r.exit_code == 2 and "whoqa index" in r.output  # no contexts yet: says what to run
    assert run(app, ["index", "--workspace", ws, "--ranker", "bm25f", "--jobs", "1"]).exit_code == 0
    r = run(app, ["pretrain", "--workspace", ws, "--max-train-samples", "300"])
    assert r.exit_code == 0, r.output
    for extra in ([], ["--from-pretrained"]):
        r = run(app, ["train", "--workspace", ws, "--folds", "2", "--trials", "2", "--epochs", "3", *extra])
        assert r.exit_code == 0, r.output
    r = run(app, ["eval", "--workspace", ws])
    assert r.exit_code == 0, r.output
    assert "memnet+salience[bm25f]" in r.output and "memnet+pretrain+salience[bm25f]" in r.output
    saved = json.loads((tmp_path / "ws" / "results" / "memnet+pretrain+salience[bm25f].json").read_text())
    assert saved["trials"] == 4 and 0 <= saved["p@1"] <= 100 and saved["config"]["from_pretrained"] is True
    # resuming: nothing left to do, same numbers
    r2 = run(app, ["train", "--workspace", ws, "--folds", "2", "--trials", "2", "--epochs", "3"])
    assert r2.exit_code == 0 and "4 runs" in r2.output
    assert run(app, ["train", "--workspace", ws, "--final", "--epochs", "3", "--from-pretrained"]).exit_code == 0
    r = run(app, ["ask", "--workspace", ws, "--book", "nope", "Who is it?"])
    assert r.exit_code == 2 and "not prepared" in r.output
    r = run(app, ["ask", "--workspace", ws, "--book", DYING_DETECTIVE, "Who poisons Holmes with a box?", "--route",
                  "network", "--verbose"])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    probs = [float(l.split("%")[0]) for l in lines if "%" in l[:8]]
    assert len(probs) == 5 and probs == sorted(probs, reverse=True) and any("[" in l for l in lines)


def test_ask_without_a_model_says_what_to_run(tmp_path, dd_ws):
    """No model is needed for a prepared book (the feature ranker answers); an unprepared one, or the network asked
    for where none is trained, says what to run."""
    r = CliRunner().invoke(app, ["ask", "--workspace", str(tmp_path), "--book", "x", "Who?", "--llm", "none"])
    assert r.exit_code == 2 and "not prepared" in r.output and "whoqa prepare" in r.output
    r = CliRunner().invoke(app, ["ask", "--workspace", str(dd_ws), "--book", DYING_DETECTIVE, "Who is ill?", "--route",
                                 "network"])
    assert r.exit_code == 2 and "no trained model" in r.output and "whoqa train --final" in r.output
    r = CliRunner().invoke(app, ["ask", "--workspace", str(dd_ws), "--book", DYING_DETECTIVE, "Who is ill?", "--llm",
                                 "none", "--verbose"])
    assert r.exit_code == 0 and "(features: " in r.output and "%" in r.output, r.output  # no model needed


def test_ablation_plot(mini_data, tmp_path):
    write_qaps(mini_data, [(DYING_DETECTIVE, *q) for q in QUESTIONS])
    ws = str(tmp_path / "ws")
    run = CliRunner().invoke
    assert run(app, ["prepare", "--data", str(mini_data), "--workspace", ws, "--book", DYING_DETECTIVE,
                     "--jobs", "1"]).exit_code == 0
    assert run(app, ["index", "--workspace", ws, "--jobs", "1"]).exit_code == 0
    r = run(app, ["ablation", "hops", "--workspace", ws, "--folds", "2", "--epochs", "2"])
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "ws" / "results" / "ablation-hops.json").read_text())
    assert [p["value"] for p in res["series"]["bm25f"]] == [1, 2, 3, 4, 5]
    png = (tmp_path / "ws" / "results" / "ablation-hops.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
