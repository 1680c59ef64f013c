"""The memory network that serves: by the cross-validated P@1 of its run (WS/runs/<name>/summary.json)."""
from __future__ import annotations

from pathlib import Path

from whoqa.core.choice import Choice, choose, recorded_score
from whoqa.memnet.config import saved_config
from whoqa.core.workspace import Workspace

METRIC = "p@1"
NOT_RECIPE = ("folds", "trials", "runs_dir", "max_train_samples", "by_book", "seed", "device", "jobs")  # how a run is
# cross-validated (and where), not what it trains


def run_score(workspace: Path, name: str, config: dict | None = None) -> float | None:
    """The run's cross-validated P@1; None without a finished run or (config given) when the run trained another
    recipe."""
    return recorded_score(Workspace(workspace).runs / name, METRIC, config, NOT_RECIPE)


def choose_model(workspace: Path, wanted: str | None = None) -> Choice:
    """A trained model under WS/models/ (`train --final`; `pretrain` last, it has no run of its own)."""
    ws = Workspace(workspace)
    names = sorted(p.parent.name for p in ws.models.glob("*/model.pt")) if ws.models.is_dir() else []
    names = [n for n in names if n != "pretrain"] + [n for n in names if n == "pretrain"]
    scores = {}
    for n in names:
        cfg = saved_config(ws.models / n).get("config")
        scores[n] = run_score(ws, n, cfg)
    try:
        return choose(names, scores, METRIC, "memory network", wanted)
    except FileNotFoundError:
        raise FileNotFoundError(f"no trained model under {ws.models}: run `whoqa train --final --workspace {ws}` "
                                "(or `whoqa pretrain`) first") from None


def choose_run(workspace: Path, wanted: str | None = None) -> Choice | None:
    """A cross-validated run (for routing the full task's Who questions); None when there is none."""
    ws = Workspace(workspace)
    names = sorted(p.name for p in ws.runs.glob("*/") if any(p.glob("fold*_trial0.json"))) if ws.runs.is_dir() else []
    if not names and not wanted:
        return None
    return choose(names, {n: run_score(ws, n) for n in names}, METRIC, "memory-network run", wanted)
