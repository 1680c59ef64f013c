"""`whoqa download`, `split`, `prepare` and `index`: the data, the books processed, the contexts ranked."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from data_prep.components import ENGINES, RESOLVERS
from data_prep.download import DownloadConfig
from data_prep.prepare import PrepareConfig
from data_prep.split import HELDOUT
from whoqa.answer_view import shown
from whoqa.cli.util import DEFAULT_DATA, DEVICE_HELP, RAY_ADDRESS_HELP, echo_json, fail, option, stage
from whoqa.core.executor import ExecutorConfig
from whoqa.core.jobs import default_jobs
from whoqa.core.seed import SEED
from whoqa.retrieval.bert_ranker import RankerConfig
from whoqa.retrieval.bm25f import RetrievalConfig
from whoqa.core.text import BOOK_FORMATS

app = typer.Typer()


@app.command()
def prepare(
    data: Optional[Path] = typer.Option(None, help="NarrativeQA-layout folder (narrativeqa/*.csv, books/); default: "
                                                   "the one the workspace's books came from (recorded), "
                                                   f"{DEFAULT_DATA} for a new workspace."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace folder for every stage's artifacts."),
    book: Optional[List[str]] = typer.Option(None, help="Only these document ids (repeatable)."),
    engine: str = option(PrepareConfig, "engine", help="; ".join(f"{n}: {e.about}" for n, e in ENGINES.items()) + "."),
    resolver: str = option(PrepareConfig, "resolver", help="The spacy engine's pronoun resolver: " + ", ".join(
        n for n, e in RESOLVERS.items() if e.make) + " (books made otherwise are redone)."),
    jobs: int = option(PrepareConfig, "jobs", help="Books processed in parallel processes."),
    parse_processes: int = option(PrepareConfig, "parse_processes",
                                  help="The spacy engine's parse of one book across this many processes (0: auto, "
                                       "one per core for a long book when books are not made side by side by "
                                       "--jobs); the same files either way."),
    unlabeled: bool = option(PrepareConfig, "unlabeled",
                             help="Also process books-unlabeled/ (artificial questions, word vectors)."),
    artificial: bool = option(PrepareConfig, "artificial", help="Generate artificial Who questions (WS/artificial/)."),
    embeddings: bool = option(PrepareConfig, "embeddings",
                              help="Word2vec with characters as words (WS/embeddings/): trained the first time, "
                                   "later books folded in (existing vectors never move)."),
    rebuild_vectors: bool = option(PrepareConfig, "rebuild_vectors",
                                   help="Train the word vectors from scratch over every prepared book (names the "
                                        "trained models this makes stale)."),
    booknlp_python: Optional[str] = option(PrepareConfig, "booknlp_python",
                                           help="Python of an environment with booknlp, transformers<=4.30."),
    booknlp_models: Optional[str] = option(PrepareConfig, "booknlp_models",
                                           help="Folder of BookNLP's model files (~/booknlp_models)."),
    max_books: Optional[int] = option(PrepareConfig, "max_books", help="Debug: only the first N books."),
    coref_weights: Optional[Path] = option(PrepareConfig, "coref_weights",
                                           help="The spacy engine's pronoun resolver with these `whoqa train-coref` "
                                                "weights (default: the hand-set rules); books made otherwise are "
                                                "redone."),
    executor: str = option(PrepareConfig, "executor", help="local (a process pool of --jobs) or ray (one task per "
                                                           "book on a Ray cluster)."),
    ray_address: Optional[str] = option(PrepareConfig, "ray_address", help=RAY_ADDRESS_HELP),
    text: Optional[List[Path]] = typer.Option(None, help=f"Instead of --data: book files ({BOOK_FORMATS}, "
                                                         "repeatable), each added as a book of its own, made by the "
                                                         "engine the workspace recorded."),
):
    """Books -> sentences, parses, characters and coreference, as BookNLP-format files under WS/books/<id>/."""
    from data_prep.prepare import Interrupted, prepare as run, source_for
    if text:
        from data_prep.addbook import add_text
        for path in text:
            typer.echo(f"book {stage(add_text, workspace, path, parse_processes=parse_processes)} <- {shown(path)}")
        return
    data, books = stage(source_for, workspace, data, list(book or []), DEFAULT_DATA)
    cfg = PrepareConfig(data=data, workspace=str(workspace), books=books, engine=engine,
                        resolver=resolver, jobs=jobs, parse_processes=parse_processes,
                        unlabeled=unlabeled, booknlp_python=booknlp_python, booknlp_models=booknlp_models,
                        max_books=max_books, artificial=artificial, embeddings=embeddings,
                        rebuild_vectors=rebuild_vectors, coref_weights=str(coref_weights) if coref_weights else None,
                        executor=executor, ray_address=ray_address)
    try:
        rep = stage(run, cfg)
    except Interrupted as e:
        typer.secho(str(e), fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(130)
    if cfg.rebuild_vectors and rep.embeddings:  # the models are the memory network's to judge, not data_prep's
        from whoqa.memnet.config import stale_models
        rep.embeddings["stale_models"] = stale_models(workspace, rep.embeddings["lineage"])
    lines, warnings = rep.summary(workspace)
    typer.echo("\n".join(lines))
    for w in warnings:
        typer.secho(w, fg=typer.colors.YELLOW, err=True)
    if rep.failed and not rep.done and not rep.skipped:
        raise typer.Exit(1)


@app.command()
def download(
    data: Path = typer.Option(Path("narrativeqa-data"), help="Folder to build (NarrativeQA layout)."),
    csv_base_url: str = option(DownloadConfig, "csv_base_url",
                               help="Where documents.csv and qaps.csv live (default: NarrativeQA's repository)."),
    book: Optional[List[str]] = typer.Option(None, help="Only these document ids."),
    kind: str = option(DownloadConfig, "kind", help="gutenberg (books), movie, or all."),
    split: Optional[str] = option(DownloadConfig, "split", help="Only this set: train, valid or test."),
    max_books: Optional[int] = option(DownloadConfig, "max_books", help="Debug: only the first N books."),
):
    """Fetch NarrativeQA's csv files and books from their public sources (connected machines only). Resumable."""
    from data_prep.download import download as run
    rep = stage(run, DownloadConfig(data=str(data), csv_base_url=csv_base_url, books=list(book or []), kind=kind,
                                    split=split, max_books=max_books))
    echo_json(rep)
    if rep["failed"]:
        raise typer.Exit(1)


@app.command()
def split(
    data: Path = typer.Option(DEFAULT_DATA, help="NarrativeQA-layout folder to split."),
    out: Path = typer.Option(Path("split"), help="Folder for OUT/seen and OUT/unseen (symbolic links)."),
    heldout: int = typer.Option(HELDOUT, help="Labelled books held out (never prepared in the training workspace)."),
    seed: int = typer.Option(SEED, help="Seed of the held-out sample."),
):
    """Hold out books: OUT/seen (the other labelled books + unlabeled) to train on, OUT/unseen to `whoqa eval --data`."""
    from data_prep.split import split_books
    rec = stage(split_books, data, out, heldout, seed)
    typer.echo(f"{len(rec['seen'])} labelled books -> {out}/seen, {len(rec['heldout'])} held out -> {out}/unseen "
               f"(list: {out}/split.json)")


@app.command()
def index(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    ranker: str = typer.Option("bm25f", help="bm25f, bert, both, or oracle (BM25F with question + answers: the "
                                             "reader's upper bound)."),
    jobs: int = typer.Option(default_jobs(), help="Books indexed in parallel processes."),
    k1: float = option(RetrievalConfig, "k1", help="BM25 k1."),
    b: float = option(RetrievalConfig, "b", help="BM25 b."),
    words_weight: float = option(RetrievalConfig, "words_weight", help="BM25F weight of the words field (>= 1)."),
    characters_weight: float = option(RetrievalConfig, "characters_weight",
                                      help="BM25F weight of the characters field (>= 1)."),
    context_sentences: int = option(RetrievalConfig, "context_sentences",
                                    help="Sentences stored per question's context (models read 100)."),
    bert_base: Optional[str] = option(RankerConfig, "base", help="BERT ranker: base model path (default: bundled "
                                                                 "MiniLM)."),
    bert_folds: int = option(RankerConfig, "folds", help="BERT ranker: book folds (a book is ranked by a model "
                                                         "trained on the others)."),
    bert_pool: int = option(RankerConfig, "pool", help="BERT ranker: BM25F candidates scored per question (0: all "
                                                       "sentences)."),
    bert_epochs: int = option(RankerConfig, "epochs", help="BERT ranker: training epochs."),
    seed: int = option(RankerConfig, "seed", help="BERT ranker: seed for pairs, folds and training."),
    device: str = typer.Option("auto", help=f"BERT ranker: {DEVICE_HELP}."),
    executor: str = option(ExecutorConfig, "executor", help="BM25F: local (a process pool of --jobs) or ray (one "
                                                            "task per book on a Ray cluster)."),
    ray_address: Optional[str] = option(ExecutorConfig, "ray_address", help=RAY_ADDRESS_HELP),
):
    """Rank each question's 5-sentence windows (BM25F over Lucene, BERT ranker) -> WS/contexts/<ranker>/."""
    from whoqa.retrieval.contexts import build_contexts
    if min(words_weight, characters_weight) < 1:
        fail("BM25F field weights must be >= 1 (Lucene's CombinedFieldQuery)")
    cfg = RetrievalConfig(k1=k1, b=b, words_weight=words_weight, characters_weight=characters_weight,
                          context_sentences=context_sentences)
    rcfg = RankerConfig(base=bert_base, folds=bert_folds, pool=bert_pool, epochs=bert_epochs, seed=seed)
    for r in (["bm25f", "bert"] if ranker == "both" else [ranker]):
        rep = stage(build_contexts, workspace, r, jobs, cfg, ranker_cfg=rcfg, device=device,
                    executor=ExecutorConfig(executor, ray_address).check())
        typer.echo(rep.summary(workspace))

