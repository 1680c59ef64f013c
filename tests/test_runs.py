"""Runs you can trust: a changed config redoes the work (never reuses or mixes it), and results say what made them."""
import json
import logging
import os

from typer.testing import CliRunner

from cli import app
from tests.conftest import DYING_DETECTIVE, SHORT_BOOKS, write_qaps
from tests.test_pipeline import QUESTIONS

run = CliRunner().invoke


def test_changed_configs_redo_the_work(mini_data, dd_ws):
    write_qaps(mini_data, [(DYING_DETECTIVE, *q) for q in QUESTIONS])
    ws = dd_ws
    assert run(app, ["prepare", "--data", str(mini_data), "--workspace", str(ws), "--book", DYING_DETECTIVE,
                     "--jobs", "1"]).exit_code == 0
    assert run(app, ["index", "--workspace", str(ws), "--jobs", "1"]).exit_code == 0
    ctx = ws / "contexts" / "bm25f" / f"{DYING_DETECTIVE}.json"
    r = run(app, ["index", "--workspace", str(ws), "--jobs", "1"])
    assert "1 already done" in r.output and "redone" not in r.output
    r = run(app, ["index", "--workspace", str(ws), "--jobs", "1", "--k1", "0.3", "--b", "0.1",
                  "--context-sentences", "10"])
    assert r.exit_code == 0 and "1 redone" in r.output
    saved = json.loads(ctx.read_text())["config"]
    assert (saved["k1"], saved["b"], saved["context_sentences"]) == (0.3, 0.1, 10)
    assert all(sum(b - a + 1 for a, b, _ in w) <= 14 for w in json.loads(ctx.read_text())["questions"].values())
    assert run(app, ["index", "--workspace", str(ws), "--jobs", "1"]).exit_code == 0  # back to the defaults

    run_dir = ws / "runs" / "memnet+salience[bm25f]"
    r = run(app, ["train", "--workspace", str(ws), "--folds", "3", "--trials", "1", "--epochs", "2", "--device", "cpu"])
    assert r.exit_code == 0 and "3 runs" in r.output
    first = json.loads((run_dir / "run.json").read_text())
    r = run(app, ["train", "--workspace", str(ws), "--folds", "3", "--trials", "1", "--epochs", "2"])  # device auto
    assert "3 runs" in r.output and "redone" not in r.output  # same identity: resumed, nothing redone (where it ran
    # is not what it is)
    r = run(app, ["train", "--workspace", str(ws), "--folds", "3", "--trials", "1", "--epochs", "4", "--hops", "1"])
    assert r.exit_code == 0 and "redone" in r.output and "epochs" in r.output and "hops" in r.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["runs_this_run"] == 3 and summary["provenance"]["config"]["epochs"] == 4
    assert all(len(json.loads(f.read_text())["losses"]) == 4 for f in run_dir.glob("fold*_trial*.json"))
    assert (ws / "runs-archive" / f"memnet+salience[bm25f]@{first['identity']}" / "fold0_trial0.json").is_file()  # kept
    r = run(app, ["train", "--workspace", str(ws), "--folds", "2", "--trials", "1", "--epochs", "4", "--hops", "1"])
    assert r.exit_code == 0 and "2 runs" in r.output and "folds" in r.output  # no leftover fold files mixed in
    assert sorted(f.name for f in run_dir.glob("fold*_trial*.json")) == ["fold0_trial0.json", "fold1_trial0.json"]
    r = run(app, ["eval", "--workspace", str(ws)])
    res = json.loads((ws / "results" / "memnet+salience[bm25f].json").read_text())
    assert res["trials"] == 2 and res["provenance"]["config"]["folds"] == 2
    assert res["code"]["packages"]["torch"] and "git" in res["code"]


def test_a_reader_run_with_another_config_is_archived_not_overwritten(mini_data, dd_ws, tiny_reader_path):
    write_qaps(mini_data, [(DYING_DETECTIVE, *q) for q in QUESTIONS] + [(SHORT_BOOKS[0], "Who is the naughty kitten?",
                                                                          "Tom Kitten", "Tom")])
    ws = dd_ws
    assert run(app, ["prepare", "--data", str(mini_data), "--workspace", str(ws), "--book", DYING_DETECTIVE,
                     "--book", SHORT_BOOKS[0], "--jobs", "1"]).exit_code == 0
    base = ["reader", "train", "--workspace", str(ws), "--context", "none", "--folds", "2", "--beams", "1",
            "--reader-base", tiny_reader_path]
    assert run(app, base + ["--epochs", "1"]).exit_code == 0
    run_dir = ws / "reader" / "runs" / "fid[none]"
    assert json.loads((run_dir / "fold0.json").read_text())["config"]["epochs"] == 1
    r = run(app, base + ["--epochs", "2"])
    assert r.exit_code == 0, r.output
    assert all(json.loads((run_dir / f"fold{k}.json").read_text())["config"]["epochs"] == 2 for k in range(2))
    kept = list((ws / "reader" / "runs-archive").glob("fid[[]none]@*/fold0.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["config"]["epochs"] == 1


def test_pretraining_is_done_once_per_identity(mini_data, dd_ws):
    write_qaps(mini_data, [(DYING_DETECTIVE, *q) for q in QUESTIONS])
    ws = dd_ws
    model = ws / "models" / "pretrain" / "model.pt"
    cmd = ["pretrain", "--workspace", str(ws), "--max-train-samples", "64"]
    r = run(app, cmd)
    assert r.exit_code == 0 and "already done" not in r.output, r.output
    made = model.stat().st_mtime_ns
    r = run(app, cmd)  # same config, vectors and artificial questions: reused
    assert r.exit_code == 0 and r.output.startswith("already done") and model.stat().st_mtime_ns == made
    from data_prep.addbook import add_text
    story = ws.parent / "story.txt"
    story.write_text("Anna met Peter Brown in the garden. Peter gave Anna a rose, and she thanked him.\n" * 30)
    new = add_text(ws, story)  # a book folded into the vectors after pretraining (`ask --text`): rows grow, none
    assert (ws / "artificial" / f"{new}.jsonl.gz").is_file()  # moves; its artificial questions are a new book's:
    r = run(app, cmd)  # never pretrained on, so the pretraining stays what it was
    assert r.exit_code == 0 and r.output.startswith("already done") and model.stat().st_mtime_ns == made, r.output
    r = run(app, cmd + ["--hops", "1"])  # another config: redone, and the model says so
    assert r.exit_code == 0 and "already done" not in r.output and model.stat().st_mtime_ns != made
    assert json.loads((ws / "models" / "pretrain" / "config.json").read_text())["config"]["hops"] == 1
    made = model.stat().st_mtime_ns
    from whoqa.core.store import read_artificial, write_artificial
    for f in (ws / "artificial").glob("*.jsonl.gz"):  # other questions, written by their writer (its checksum too):
        rows = read_artificial(f)                       # redone
        write_artificial(f, rows[: len(rows) // 2])
    r = run(app, cmd + ["--hops", "1"])
    assert r.exit_code == 0 and "already done" not in r.output and model.stat().st_mtime_ns != made


def test_a_run_recorded_before_a_new_config_field_stays_valid(tmp_path):
    """Runs and models recorded before salience/roles existed did what --no-salience does, and recorded the vectors'
    row count, which folding in a book grows: they are still that run (not redone, not archived); the new default
    (salience) and other vectors are other runs."""
    from dataclasses import asdict
    from whoqa.core.runs import claim, provenance, same_run
    from whoqa.memnet.config import ADDED, TrainConfig, effective, upgrade
    inputs = {"who_set": "abc", "vectors": {"lineage": "v1"}}
    old_config = {k: v for k, v in asdict(TrainConfig(salience=False)).items() if k not in ADDED}
    old = provenance(old_config, {**inputs, "vectors": {"lineage": "v1", "rows": 100}})  # rows: grown since
    run_dir = tmp_path / "runs" / "memnet[bm25f]"
    claim(run_dir, old, tmp_path / "archive")
    (run_dir / "fold0_trial0.json").write_text("{}")
    paper = provenance(effective(asdict(TrainConfig(salience=False))), inputs)
    assert paper["identity"] != old["identity"] and same_run(old, paper, upgrade)
    assert not same_run(old, paper)  # without reading the old record as today's, it would look stale
    assert claim(run_dir, paper, tmp_path / "archive", upgrade) is None and (run_dir / "fold0_trial0.json").is_file()
    assert json.loads((run_dir / "run.json").read_text())["identity"] == paper["identity"]  # recorded as today's
    assert not same_run(old, provenance(effective(asdict(TrainConfig())), inputs), upgrade)  # salience: another run
    off = provenance(effective(asdict(TrainConfig(salience=False, salience_lr=0.5))), inputs)
    assert same_run(old, off, upgrade)  # a salience rate without salience changes nothing
    rebuilt = provenance(effective(asdict(TrainConfig(salience=False))), {**inputs, "vectors": {"lineage": "v2"}})
    assert not same_run(old, rebuilt, upgrade)  # vectors rebuilt from scratch: another run


def test_run_names_are_built_and_read_by_one_type():
    """Every name whoqa makes reads back as the parts that made it; the memory network's names come from it."""
    import pytest
    from whoqa.core.runs import RunName
    from whoqa.memnet.config import TrainConfig, model_name, run_name
    cfg = TrainConfig(from_pretrained=True, salience=True, by_book=True, seed=14)
    name = RunName.parse(run_name(cfg))
    assert name == RunName("memnet", ("pretrain", "salience"), "bm25f", True, None, 14)
    assert name.model == model_name(cfg) == "memnet+pretrain+salience[bm25f]"
    assert RunName.parse("features+by-book+folds5") == RunName("features", by_book=True, folds=5)
    for text in ("memnet[bert]", "memnet+pretrain+salience+w2v-chars[bm25f]+by-book+seed15", "features+by-book"):
        assert str(RunName.parse(text)) == text
    with pytest.raises(ValueError, match="not a run name"):
        RunName.parse("My Run!")


def test_a_models_runs_are_found_by_their_parsed_name_not_by_prefix(tmp_path):
    from whoqa.core.runs import runs_of_model
    for name in ("memnet+salience[bm25f]", "memnet+salience[bm25f]+by-book", "memnet+salience[bm25f]+seed14",
                 "memnet+salience+roles[bm25f]", "memnet+salience[bert]", "not a run", "features+by-book"):
        (tmp_path / name).mkdir()
    assert [p.name for p in runs_of_model(tmp_path, "memnet+salience[bm25f]")] == [
        "memnet+salience[bm25f]", "memnet+salience[bm25f]+by-book", "memnet+salience[bm25f]+seed14"]
    assert runs_of_model(tmp_path / "missing", "memnet") == []


def test_folds_in_two_processes_give_the_files_of_one(mini_data, dd_ws):
    """`train --jobs 2` forks the folds' trials out; each is seeded by its fold and trial alone, so its file holds
    what one process writes, and the run is the same run (resumed, not redone, with another --jobs)."""
    write_qaps(mini_data, [(DYING_DETECTIVE, *q) for q in QUESTIONS])
    ws = dd_ws
    assert run(app, ["prepare", "--data", str(mini_data), "--workspace", str(ws), "--book", DYING_DETECTIVE,
                     "--jobs", "1"]).exit_code == 0
    assert run(app, ["index", "--workspace", str(ws), "--jobs", "1"]).exit_code == 0
    run_dir = ws / "runs" / "memnet+salience[bm25f]"
    files = {}
    for jobs in ("1", "2"):
        r = run(app, ["train", "--workspace", str(ws), "--folds", "2", "--trials", "2", "--epochs", "2", "--jobs", jobs])
        assert r.exit_code == 0 and "4 runs" in r.output, r.output
        files[jobs] = {f.name: json.loads(f.read_text()) for f in sorted(run_dir.glob("fold*_trial*.json"))}
        if jobs == "1":
            r = run(app, ["train", "--workspace", str(ws), "--folds", "2", "--trials", "2", "--epochs", "2", "--jobs",
                          "2"])
            assert "redone" not in r.output  # where it ran is not what it is
            for f in run_dir.glob("fold*_trial*.json"):
                f.unlink()
    assert len(files["1"]) == 4 and files["1"] == files["2"]


class _DiesWhenUnpickled:
    def __reduce__(self):
        return os._exit, (3,)  # a worker handed this dies as it starts, as one killed would


def test_a_dead_training_worker_is_one_warning_and_its_runs_are_left_to_this_process(caplog):
    from types import SimpleNamespace
    from whoqa.memnet.train import _in_workers
    updates = []
    bar = SimpleNamespace(update=updates.append)
    with caplog.at_level(logging.WARNING, logger="whoqa.memnet.train"):
        done = _in_workers([(0, 0), (1, 0)], (None, SimpleNamespace(jobs=2), _DiesWhenUnpickled()), bar)
    assert done == 0 and updates == []  # nothing counted as done: _cross_validate runs what has no file here
    assert [r.message for r in caplog.records if "worker died" in r.message] == [caplog.records[-1].message]
    assert "2 run(s) it left go on in this process" in caplog.records[-1].message
