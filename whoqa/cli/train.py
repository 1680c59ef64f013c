"""`whoqa pretrain` and `train`: the memory network (whoqa.memnet); its ablations are in whoqa.cli.evaluate."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from whoqa.cli.util import DEVICE_HELP, default, option, stage
from whoqa.memnet.config import PretrainConfig, TrainConfig

app = typer.Typer()


@app.command("pretrain")
def pretrain_cmd(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    epochs: int = option(PretrainConfig, "epochs", help="Epochs over the artificial questions (paper: 1)."),
    fraction: float = option(PretrainConfig, "fraction", help="Share of the artificial questions used (Figure 5)."),
    lr: float = option(PretrainConfig, "lr", help="Adam learning rate."),
    batch_size: int = option(PretrainConfig, "batch_size", help="Questions per batch."),
    hops: int = option(PretrainConfig, "hops", help="Memory hops."),
    salience: bool = option(PretrainConfig, "salience", help="Learned salience features (see train)."),
    roles: bool = option(PretrainConfig, "roles", help="Role-weighted values (see train)."),
    name: str = option(PretrainConfig, "name", help="Output folder under WS/models/ (train picks it with "
                                                    "--pretrained)."),
    device: str = option(PretrainConfig, "device", help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = option(PretrainConfig, "seed", help="Seed."),
    max_train_samples: Optional[int] = option(PretrainConfig, "max_train_samples",
                                              help="Debug: only the first N questions."),
):
    """Pretrain the memory network on the artificial Who questions (embeddings trainable) -> WS/models/pretrain/.
    (The reader's pretraining: `whoqa reader preread`, `whoqa reader lookup`.)"""
    from whoqa.memnet.train import pretrain
    report = stage(pretrain, workspace, PretrainConfig(epochs=epochs, fraction=fraction, lr=lr, batch_size=batch_size,
                                                       hops=hops, salience=salience, roles=roles, name=name, seed=seed,
                                                       device=device, max_train_samples=max_train_samples))
    typer.echo(report.summary())


@app.command("train")
def train_cmd(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    folds: int = option(TrainConfig, "folds", help="Cross-validation folds over the Who questions."),
    trials: int = option(TrainConfig, "trials", help="Trials (seeds) per fold."),
    ranker: str = option(TrainConfig, "ranker", help="Contexts from bm25f or bert."),
    from_pretrained: bool = option(TrainConfig, "from_pretrained", help="Start from `whoqa pretrain`'s model."),
    pretrained: str = option(TrainConfig, "pretrained", help="Which pretrained model (WS/models/NAME)."),
    device: str = option(TrainConfig, "device", help=f"Where it trains: {DEVICE_HELP}."),
    epochs: int = option(TrainConfig, "epochs", help="Epochs (as in the paper)."),
    lr: float = option(TrainConfig, "lr", help=f"Adam learning rate, x{default(TrainConfig, 'decay')} every "
                                               f"{default(TrainConfig, 'decay_every')} epochs."),
    batch_size: int = option(TrainConfig, "batch_size", help="Questions per batch."),
    memories: int = option(TrainConfig, "memories", help="Context sentences (memory slots)."),
    hops: int = option(TrainConfig, "hops", help="Memory hops."),
    salience: bool = option(TrainConfig, "salience",
                            help="Learned salience features (mentions in the book and the context, recency, "
                                 "attention, named in the question) in the output layer."),
    roles: bool = option(TrainConfig, "roles",
                         help="Values weigh each character by its role in the sentence (agent, patient, possessor) "
                              "as the question asks."),
    jobs: int = option(TrainConfig, "jobs", help="Processes running the folds' trials side by side (the same results "
                                                 "as one)."),
    seed: int = option(TrainConfig, "seed", help="Seed of folds and trials (a run with another seed is its own run, "
                                                 "<name>+seed<N>; book-level folds stay the same)."),
    char_vectors: str = option(TrainConfig, "char_vectors",
                               help="With --from-pretrained: the characters' vectors as pretraining tuned them "
                                    "(pretrained) or as word2vec made them (word2vec: as a new book's are)."),
    by_book: bool = option(TrainConfig, "by_book",
                           help="Folds over books (the new-book measure): every question is answered by a model "
                                "that never trained on its book; with --from-pretrained, pretraining is redone "
                                "per fold without the fold's books -> WS/runs/<name>+by-book."),
    max_train_samples: Optional[int] = option(TrainConfig, "max_train_samples",
                                              help="Debug: train on the first N questions of a fold."),
    final: bool = typer.Option(False, help="Instead: one model on all Who questions for `whoqa ask`."),
):
    """Fine-tune the memory network on the real Who questions with k-fold cross-validation x trials ->
    WS/runs/<name>/ (resumable), or with --final the model `ask` serves. (The reader: `whoqa reader train`, `whoqa
    reader llm`.)"""
    from whoqa.memnet.train import cross_validate, train_final
    cfg = TrainConfig(ranker=ranker, trials=trials, memories=memories, hops=hops, seed=seed, salience=salience,
                      roles=roles, pretrained=pretrained, device=device, by_book=by_book, char_vectors=char_vectors,
                      from_pretrained=from_pretrained, max_train_samples=max_train_samples, epochs=epochs, lr=lr,
                      batch_size=batch_size, folds=folds, jobs=jobs)
    if final:
        typer.echo(stage(train_final, workspace, cfg).summary(workspace))
        return
    lines, warnings = stage(cross_validate, workspace, cfg).summary()
    for w in warnings:
        typer.secho(w, fg=typer.colors.YELLOW, err=True)
    typer.echo("\n".join(lines))

