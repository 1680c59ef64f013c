"""Serving chooses by recorded cross-validated results: the model whose own run scored best, never a model a run did
not measure (another recipe), and it says why."""
import json

import pytest

from whoqa.core.choice import choose
from whoqa.memnet.choose import choose_model, choose_run


def _memnet(ws, name, p1, epochs=60, final=True, run=True):
    if final:
        (ws / "models" / name).mkdir(parents=True)
        (ws / "models" / name / "model.pt").write_bytes(b"")
        (ws / "models" / name / "config.json").write_text(json.dumps({"config": {"epochs": epochs, "folds": 10}}))
    if run:
        (ws / "runs" / name).mkdir(parents=True)
        (ws / "runs" / name / "config.json").write_text(json.dumps({"epochs": 60, "folds": 10, "trials": 5}))
        (ws / "runs" / name / "summary.json").write_text(json.dumps({"p@1": p1}))
        (ws / "runs" / name / "fold0_trial0.json").write_text("{}")


def test_the_best_cross_validated_model_serves(tmp_path):
    _memnet(tmp_path, "memnet[bm25f]", 20.0)
    _memnet(tmp_path, "memnet+pretrain[bm25f]", 25.5)
    _memnet(tmp_path, "memnet+pretrain[bert]", 30.0, epochs=5)  # its final model is not the recipe its run measured
    (tmp_path / "models" / "pretrain").mkdir()
    (tmp_path / "models" / "pretrain" / "model.pt").write_bytes(b"")
    c = choose_model(tmp_path)
    assert c.name == "memnet+pretrain[bm25f]" and c.score == 25.5 and "25.50" in c.why
    assert choose_run(tmp_path).name == "memnet+pretrain[bert]"  # routing reads runs, and that run is the best
    assert choose_model(tmp_path, "memnet[bm25f]").name == "memnet[bm25f]"
    with pytest.raises(ValueError, match="not found"):
        choose_model(tmp_path, "memnet[nope]")


def test_without_runs_the_first_candidate_serves_and_says_so(tmp_path):
    (tmp_path / "models" / "pretrain").mkdir(parents=True)
    (tmp_path / "models" / "pretrain" / "model.pt").write_bytes(b"")
    _memnet(tmp_path, "memnet[bm25f]", 0, run=False)
    c = choose_model(tmp_path)
    assert c.name == "memnet[bm25f]" and c.score is None and "no cross-validated run" in c.why
    with pytest.raises(FileNotFoundError, match="whoqa train --final"):
        choose_model(tmp_path / "empty")


def test_ties_go_to_the_first_name():
    assert choose(["b", "a"], {"a": 1.0, "b": 1.0}, "m", "x").name == "a"
