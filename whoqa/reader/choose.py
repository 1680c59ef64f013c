"""The reader that serves: by the cross-validated ROUGE-L of its run (WS/reader/runs/<name>/summary.json)."""
from __future__ import annotations

from pathlib import Path

from whoqa.core.choice import Choice, choose, recorded_score
from whoqa.core.workspace import Workspace
from whoqa.reader.model import READER_FILE, read_reader_record

METRIC = "rouge_l"
NOT_RECIPE = ("folds", "max_train_samples", "max_eval_samples", "extra")


def run_score(workspace: Path, name: str, config: dict | None = None) -> float | None:
    return recorded_score(Workspace(workspace).reader_runs / name, f"metrics.{METRIC}", config, NOT_RECIPE)


def final_config(workspace: Path, name: str) -> dict:
    return (read_reader_record(Workspace(workspace).reader_models / name / "final") or {}).get("config", {})


def choose_model(workspace: Path, wanted: str | None = None, contexts: tuple[str, ...] | None = None) -> Choice:
    """A final reader (`reader train --final`), optionally only those reading one of `contexts`."""
    ws = Workspace(workspace)
    names = sorted(p.parent.parent.name for p in ws.reader_models.glob(f"*/final/{READER_FILE}"))
    if contexts is not None:
        names = [n for n in names if final_config(ws, n).get("context", "bm25f") in contexts]
    if not names:
        raise FileNotFoundError(f"no trained reader under {ws.reader_models}: run `whoqa reader train --final "
                                f"--workspace {ws}` first")
    return choose(names, {n: run_score(ws, n, final_config(ws, n)) for n in names}, METRIC, "reader", wanted)


def choose_run(workspace: Path, runs: dict[str, float], wanted: str | None = None) -> Choice | None:
    """Of finished cross-validated runs {name: ROUGE-L over its folds}, the one routing uses; None without runs."""
    if not runs and not wanted:
        return None
    return choose(sorted(runs), runs, METRIC, "reader run", wanted)
