"""`whoqa slots pretrain` and `whoqa slots train`: the memory network over anonymous character slots
(whoqa.memnet.slots), the one that answers about books it never saw."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from whoqa.cli.util import DEVICE_HELP, option, stage
from whoqa.memnet.slot_train import FINAL, PRETRAINED, SlotPretrainConfig, SlotTuneConfig
from whoqa.ranker.config import RerankConfig

app = typer.Typer(no_args_is_help=True, help="The memory network over anonymous character slots: pretrain it on the "
                                             "artificial questions, judge it on held-out books, train the one ask uses.")


@app.command("pretrain")
def pretrain_cmd(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` (books, word vectors, artificial "
                                                    "questions)."),
    epochs: int = option(SlotPretrainConfig, "epochs", help="Epochs over the artificial questions."),
    fraction: float = option(SlotPretrainConfig, "fraction", help="Share of the artificial questions used."),
    lr: float = option(SlotPretrainConfig, "lr", help="Adam learning rate."),
    batch_size: int = option(SlotPretrainConfig, "batch_size", help="Questions per batch (one book each)."),
    hops: int = option(SlotPretrainConfig, "hops", help="Memory hops."),
    slots: int = option(SlotPretrainConfig, "slots", help="Anonymous slots per question."),
    seed: int = option(SlotPretrainConfig, "seed", help="Seed."),
    device: str = option(SlotPretrainConfig, "device", help=f"Where it trains: {DEVICE_HELP}."),
    exclude: Optional[list[str]] = typer.Option(None, help="Books whose artificial questions stay out (e.g. the "
                                                           "books it will be judged on)."),
    exclude_who: bool = typer.Option(True, help="Leave out the artificial questions of every book with Who "
                                                "questions, so book-level CV never judges a book pretraining read."),
):
    """Pretrain on the artificial Who questions -> WS/models/slots-pretrain/."""
    from whoqa.core.store import load_who_set
    from whoqa.core.workspace import Workspace
    from whoqa.memnet.slot_train import pretrain
    left_out = set(exclude or ())
    if exclude_who:
        left_out |= set(stage(load_who_set, Workspace(workspace))[0])
    cfg = SlotPretrainConfig(epochs=epochs, fraction=fraction, lr=lr, batch_size=batch_size, hops=hops, slots=slots,
                             seed=seed, device=device)
    rec = stage(pretrain, workspace, Workspace(workspace).models / PRETRAINED, cfg, left_out)
    typer.echo(f"pretrained on {rec['questions']:,} artificial questions of {len(rec['books'])} books "
               f"({len(rec['excluded'])} left out) in {rec['seconds']:.0f} s: loss {rec['losses'][-1]:.4f}")


@app.command("train")
def train_cmd(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    folds: int = option(RerankConfig, "folds", help="Book folds (the feature ranker's: its network feature reads "
                                                    "these held-out scores)."),
    fold_seed: int = option(RerankConfig, "fold_seed", help="Which books go together in the folds."),
    epochs: int = option(SlotTuneConfig, "epochs", help="Epochs over the Who questions."),
    lr: float = option(SlotTuneConfig, "lr", help="Adam learning rate."),
    trials: int = option(SlotTuneConfig, "trials", help="Models per fold (their log-probabilities averaged)."),
    memories: int = option(SlotTuneConfig, "memories", help="Context sentences read."),
    seed: int = option(SlotTuneConfig, "seed", help="Seed of the trials."),
    device: str = option(SlotTuneConfig, "device", help=f"Where it trains: {DEVICE_HELP}."),
    final: bool = typer.Option(False, help="Instead: the models `ask` uses, on every Who question -> "
                                           "WS/models/slots/."),
):
    """Fine-tune on the real Who questions by book folds (every question answered by models that never saw its book)
    -> WS/runs/slots+by-book/cv.json, or with --final the ensemble `ask` uses."""
    from whoqa.core.workspace import Workspace
    from whoqa.memnet import slot_train
    ws = Workspace(workspace)
    cfg = SlotTuneConfig(epochs=epochs, lr=lr, trials=trials, memories=memories, seed=seed, device=device)
    if final:
        rec = stage(slot_train.final, workspace, ws.models / PRETRAINED, ws.models / FINAL, cfg)
        typer.echo(f"{rec['questions']} Who questions, {cfg.trials} models -> {ws.models / FINAL}")
        return
    out = slot_train.cv_file(workspace, folds, fold_seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    got = stage(slot_train.book_cv, workspace, ws.models / PRETRAINED, cfg, folds, fold_seed, out=out)
    m = got["metrics"]
    typer.echo(f"book-level CV, {m['n']} questions: P@1 {m['p@1']:.2f}  P@5 {m['p@5']:.2f}  MRR {m['mrr']:.3f} -> {out}")
