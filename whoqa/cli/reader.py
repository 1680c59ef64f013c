"""`whoqa reader`: the FiD reader's pretraining (preread, lookup) and cross-validated training, and a local LLM's
zero-shot answers (whoqa.reader)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from whoqa.cli.util import DEVICE_HELP, RAY_ADDRESS_HELP, option, stage
from whoqa.core.device import AUTO
from whoqa.core.executor import ExecutorConfig
from whoqa.reader.config import LookupConfig, PrereadConfig, ReaderConfig
from whoqa.llm.config import LLMConfig

app = typer.Typer(no_args_is_help=True, help="The reader for every other question: the FiD reader's pretraining and "
                  "cross-validated training, and a local LLM's zero-shot answers.")
READER_BASE_HELP = "HF seq2seq or BERT path (default: the bundled MiniLM as bert2bert)."
BF16_HELP = "bfloat16 autocast (~1.8x faster on CPUs with AVX512-BF16)."


@app.command("preread")
def reader_preread(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    reader_base: Optional[str] = option(PrereadConfig, "base", help=READER_BASE_HELP),
    passages: int = option(PrereadConfig, "passages", help="Passages restored."),
    books: str = option(PrereadConfig, "books", help="unlabeled (books without questions) or all."),
    lr: float = option(PrereadConfig, "lr", help="AdamW learning rate (linear decay)."),
    train_encoder: bool = option(PrereadConfig, "train_encoder", help="Train the encoder too (default: decoder only)."),
    bf16: bool = option(PrereadConfig, "bf16", help=BF16_HELP),
    device: str = typer.Option(AUTO, help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = option(PrereadConfig, "seed", help="Seed."),
):
    """Book prereading (Mou et al.): the reader restores masked passages of the books -> WS/models/preread/."""
    from whoqa.reader.preread import preread
    pcfg = PrereadConfig(base=reader_base, passages=passages, train_encoder=train_encoder, books=books, lr=lr,
                         bf16=bf16, seed=seed)
    typer.echo(stage(preread, workspace, pcfg, device=device).summary(workspace))


@app.command("lookup")
def reader_lookup(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    reader_base: Optional[str] = option(LookupConfig, "base", help=READER_BASE_HELP),
    questions: int = option(LookupConfig, "questions", help="Artificial questions trained on."),
    books: str = option(LookupConfig, "books", help="unlabeled (books without questions) or all."),
    lr: float = option(LookupConfig, "lr", help="AdamW learning rate (linear decay)."),
    preread: bool = option(LookupConfig, "preread",
                           help="Start from the prereading (`whoqa reader preread`; else --reader-base)."),
    spans: float = option(LookupConfig, "spans", help="Share of What/Where/When/Why questions whose answer is a span "
                                                      "(the rest are Who questions)."),
    copy: bool = option(LookupConfig, "copy", help="With a copy pointer over the passages -> WS/models/lookup+copy/."),
    train_encoder: bool = option(LookupConfig, "train_encoder", help="Train the encoder too (default: decoder only)."),
    bf16: bool = option(LookupConfig, "bf16", help=BF16_HELP),
    device: str = typer.Option(AUTO, help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = option(LookupConfig, "seed", help="Seed."),
):
    """Answer lookup: the reader answers artificial questions from passages -> WS/models/lookup/."""
    from whoqa.reader.lookup import pretrain_lookup
    lcfg = LookupConfig(questions=questions, books=books, lr=lr, preread=preread, base=reader_base,
                        train_encoder=train_encoder, bf16=bf16, copy=copy, spans=spans, seed=seed)
    typer.echo("\n".join(stage(pretrain_lookup, workspace, lcfg, device=device).summary(workspace)))


@app.command("train")
def reader_train(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    context: str = option(ReaderConfig, "context", help="Passages from none, bm25f, bert or oracle."),
    reader_base: Optional[str] = option(ReaderConfig, "base", help=READER_BASE_HELP),
    preread: bool = option(ReaderConfig, "preread", help="Start from `whoqa reader preread`."),
    lookup: bool = option(ReaderConfig, "lookup", help="Start from `whoqa reader lookup`."),
    copy: bool = option(ReaderConfig, "copy", help="A copy pointer over the passages' tokens (with --lookup: from "
                                                   "`whoqa reader lookup --copy`)."),
    question_passage: bool = option(ReaderConfig, "question_passage", help="The question alone as one more passage, "
                                    "first (so the reader sees all the no-context reader sees)."),
    top_k: int = option(ReaderConfig, "top_k", help="Passages per question."),
    folds: int = option(ReaderConfig, "folds", help="Cross-validation folds over the books."),
    epochs: int = option(ReaderConfig, "epochs", help="Epochs."),
    lr: float = option(ReaderConfig, "lr", help="AdamW learning rate (linear decay)."),
    batch_size: int = option(ReaderConfig, "batch_size", help="Questions per batch."),
    train_encoder: bool = option(ReaderConfig, "train_encoder",
                                 help="Fine-tune the encoder too (default: decoder only)."),
    beams: int = option(ReaderConfig, "num_beams", help="Beam size (1 = greedy)."),
    no_repeat_ngram: int = option(ReaderConfig, "no_repeat_ngram",
                                  help="Answers never write an n-gram of this size twice (0 = off)."),
    bf16: bool = option(ReaderConfig, "bf16", help="Mixed precision in training (bfloat16, ~1.8x faster with "
                                                   "AVX512-BF16; float16 + loss scaling on older GPUs)."),
    device: str = typer.Option(AUTO, help=f"Where it trains: {DEVICE_HELP}."),
    seed: int = option(ReaderConfig, "seed", help="Seed."),
    max_train_samples: Optional[int] = option(ReaderConfig, "max_train_samples",
                                              help="Debug: train on the first N questions of a fold."),
    max_eval_samples: Optional[int] = option(ReaderConfig, "max_eval_samples",
                                             help="Debug: answer the first N questions of a fold."),
    final: bool = typer.Option(False, help="Instead: one reader on all questions for `whoqa ask`."),
):
    """The FiD reader on every question with book-level folds -> WS/reader/runs/<name>/ (resumable), or with --final
    the reader `ask` serves -> WS/models/reader/<name>/final/."""
    from whoqa.reader.train import cross_validate, train_final
    rcfg = ReaderConfig(context=context, base=reader_base, preread=preread, lookup=lookup, copy=copy, top_k=top_k,
                        question_passage=question_passage, train_encoder=train_encoder, bf16=bf16, num_beams=beams,
                        no_repeat_ngram=no_repeat_ngram, seed=seed, max_train_samples=max_train_samples,
                        max_eval_samples=max_eval_samples, epochs=epochs, lr=lr, batch_size=batch_size, folds=folds)
    typer.echo(stage(train_final if final else cross_validate, workspace, rcfg, device=device).summary(workspace))


@app.command("llm")
def reader_llm(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    reader_base: str = option(LLMConfig, "base", help="A causal LM folder, hub id, .gguf file or a packaged model."),
    context: str = option(LLMConfig, "context", help="Passages from none, bm25f, bert or oracle."),
    top_k: int = option(LLMConfig, "top_k", help="Passages per question, as many as fit."),
    prompt_tokens: int = option(LLMConfig, "prompt_tokens",
                                help="Prompt budget in tokens (cut further to the model's context)."),
    shots: int = option(LLMConfig, "shots", help="Example questions with their answers, from other books (never the "
                                                 "asked one)."),
    passage_order: str = option(LLMConfig, "order", help="The passages kept in the book's order (book, DOS-RAG) or "
                                                         "best first (rank)."),
    runtime: str = option(LLMConfig, "runtime", help="auto, transformers, llamacpp (gpt4all's llama.cpp, for GGUF "
                                                     "files it knows) or llama-cpp-python (llama.cpp built here)."),
    rendering: str = option(LLMConfig, "rendering", help="How the passages show who each mention is: raw, annotate "
                                                         "(\"she [Helen Chester]\") or replace."),
    character_list: bool = option(LLMConfig, "character_list",
                                  help="List the characters the passages mention in the prompt."),
    shorten: str = option(LLMConfig, "shorten", help="The answer kept: none, words<N> or span (the passages' "
                                                     "best-matching span); every one is reported either way."),
    sample: Optional[int] = option(LLMConfig, "sample", help="A fixed sample of N questions (the same for every model "
                                   "and variant; 200 for quick comparisons) -> <name>+sample<N>."),
    half: bool = option(LLMConfig, "half", help="Half-precision weights."),
    device: str = typer.Option(AUTO, help=f"Where the LLM runs: {DEVICE_HELP}."),
    seed: int = option(LLMConfig, "seed", help="Seed."),
    max_eval_samples: Optional[int] = option(LLMConfig, "max_eval_samples", help="Debug: the first N questions."),
    executor: str = option(ExecutorConfig, "executor", help="Its answers: local (this process) or ray (batches of "
                           "questions as tasks on a Ray cluster; the same rows, resumable)."),
    ray_address: Optional[str] = option(ExecutorConfig, "ray_address", help=RAY_ADDRESS_HELP),
):
    """A local language model answers every question zero-shot from its passages -> WS/reader/llm/<name>/
    (resumable per question); no book is trained on, so no folds."""
    from whoqa.llm.runs import answer_all
    lcfg = LLMConfig(base=reader_base, context=context, top_k=top_k, prompt_tokens=prompt_tokens, half=half, seed=seed,
                     max_eval_samples=max_eval_samples, shots=shots, order=passage_order, runtime=runtime,
                     sample=sample, rendering=rendering, character_list=character_list, shorten=shorten)
    report = stage(answer_all, workspace, lcfg, device=device, executor=ExecutorConfig(executor, ray_address))
    typer.echo("\n".join(report.summary(workspace)))
