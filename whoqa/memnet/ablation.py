"""`whoqa ablation KIND`: P@1 against hops, context size, share of artificial questions and pretraining
epochs, per ranker (Angelidis et al. Figures 3-6), as JSON and a PNG plot under WS/results/."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from whoqa.core.files import atomic_write
from whoqa.memnet.config import PretrainConfig, TrainConfig
from whoqa.memnet.train import cross_validate, pretrain
from whoqa.core.workspace import Workspace

ABLATIONS = {
    "hops": ("memory hops", [1, 2, 3, 4, 5]),
    "context": ("context sentences", [25, 50, 75, 100, 150]),
    "pretrain-fraction": ("share of artificial questions (%)", [0, 25, 50, 75, 100]),
    "pretrain-epochs": ("pretraining epochs", [0, 1, 2, 3]),
}


def run_ablation(workspace: Path, kind: str, rankers: list[str], base: TrainConfig,
                 pretrain_cfg: PretrainConfig | None = None, progress: bool = True) -> dict:
    if kind not in ABLATIONS:
        raise ValueError(f"unknown ablation {kind!r}: use one of {sorted(ABLATIONS)}")
    ws = Workspace(workspace)
    label, values = ABLATIONS[kind]
    pretrain_cfg = pretrain_cfg or PretrainConfig()
    series: dict[str, list[dict]] = {}
    for ranker in rankers:
        points = []
        for v in values:
            cfg = replace(base, ranker=ranker, runs_dir=str(ws.runs / "ablation" / kind / ranker / str(v)))
            if kind == "hops":
                cfg = replace(cfg, hops=v)
            elif kind == "context":
                cfg = replace(cfg, memories=v)
            elif v == 0:
                cfg = replace(cfg, from_pretrained=False)
            else:
                pcfg = replace(pretrain_cfg, hops=cfg.hops,
                               fraction=v / 100 if kind == "pretrain-fraction" else pretrain_cfg.fraction,
                               epochs=v if kind == "pretrain-epochs" else pretrain_cfg.epochs)
                name = pretrain_cfg.name if pcfg == pretrain_cfg else f"pretrain-{kind}-{v}"  # the default: reused
                pretrain(ws, replace(pcfg, name=name), progress)  # done once per identity
                cfg = replace(cfg, from_pretrained=True, pretrained=name)
            s = cross_validate(ws, cfg, progress).record
            points.append({"value": v, "p@1": s["p@1"], "p@1_std": s["p@1_std"], "runs": s["runs"]})
        series[ranker] = points
    result = {"ablation": kind, "x": label, "series": series, "base_config": base.__dict__}
    out = ws.results
    atomic_write(out / f"ablation-{kind}.json", json.dumps(result, indent=1))
    plot(result, out / f"ablation-{kind}.png")
    return result


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for ranker, points in result["series"].items():
        xs = [p["value"] for p in points]
        ys = [p["p@1"] for p in points]
        err = [p["p@1_std"] for p in points]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=ranker.upper() if ranker == "bert" else "BM25F")
    ax.set_xticks([p["value"] for pts in result["series"].values() for p in pts])
    ax.set_xlabel(result["x"])
    ax.set_ylabel("P@1 (%)")
    ax.set_title(f"KV-MemNet: P@1 vs {result['x']}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
