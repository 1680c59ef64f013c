"""`whoqa rerank` and `rerank-compare`: Who answers re-ranked by a local LLM (whoqa.evaluation.rerank)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from whoqa.cli.util import DEVICE_HELP, RAY_ADDRESS_HELP, option, stage
from whoqa.core.executor import ExecutorConfig
from whoqa.ranker.config import RerankConfig

app = typer.Typer()


@app.command()
def rerank(
    run: Optional[str] = typer.Argument(None, help="A cross-validated memory-network run (WS/runs/<name>), e.g. "
                                                   "'memnet+pretrain+salience[bm25f]+by-book'; none with --candidates "
                                                   "features: book folds of its own, no network trained."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa train`."),
    reader_base: str = option(RerankConfig, "base", help="The LLM that scores the names (a folder, hub id, .gguf file "
                                                         "or a packaged model)."),
    top_k: int = option(RerankConfig, "top_k", help="The candidates the LLM scores."),
    candidates: str = option(RerankConfig, "candidates", help="Whose top k: network (the run's ensemble), "
                             "book-frequency, or features (the feature ranker: its own first stage, then the LLM's "
                             "scores as a feature)."),
    prompt_tokens: int = option(RerankConfig, "prompt_tokens", help="Prompt budget in tokens."),
    device: str = typer.Option("auto", help=f"Where the LLM runs, {DEVICE_HELP}."),
    folds: int = option(RerankConfig, "folds", help="Book folds of --candidates features without a run (a run's own "
                                                    "folds otherwise)."),
    llm_features: str = option(RerankConfig, "llm_features", help="--candidates features: how the LLM's scores enter "
                               "its second stage (log_softmax, clipped, probability, rank, log_softmax+first, "
                               "clipped+first), or select: chosen per fold by cross-validation on the training "
                               "books."),
    fold_seed: int = option(RerankConfig, "fold_seed", help="--candidates features without a run: the seed that "
                            "groups books into folds (others: the spread over folds; kept as "
                            "summary+foldseed<N>.json, never served)."),
    rendering: str = option(RerankConfig, "rendering", help="How the passages show who each mention is: raw, "
                            "annotate (\"she [Helen Chester]\") or replace (\"Helen Chester\")."),
    marks: str = option(RerankConfig, "marks", help="Whose mentions are marked: all or candidates."),
    shot_policy: str = option(RerankConfig, "shot_policy", help="How the prompt's example questions are drawn: per "
                              "question, or fixed (the same for every question of a book, so llama.cpp reads them "
                              "once per book; kept as +shotsfixed)."),
    character_list: bool = option(RerankConfig, "character_list",
                                  help="List the characters the passages mention in the prompt."),
    runtime: str = option(RerankConfig, "runtime", help="What scores the names: auto (transformers, float32) or "
                          "llama-cpp-python (llama.cpp built for this CPU; its own folder)."),
    cast: bool = option(RerankConfig, "cast", help="--candidates features: the book's cast (people, a person's name "
                        "clusters merged) as answer candidates (--cast, kept as summary+cast.json; the shipped fit's), "
                        "or every character cluster."),
    stage1: str = option(RerankConfig, "stage1", help="--candidates features: its features, comma-separated "
                         "(book_share, context_mentions, named, role, role_with_args, book_role, book_role_with_args), "
                         "or all; others than the "
                         "default are kept as summary+f-<names>.json."),
    written: Optional[str] = option(RerankConfig, "written", help="--candidates features: the reader's written Who "
                                    "answers, linked (the .jsonl.gz `whoqa choice-rows` writes), for the "
                                    "written features of --stage1 (kept as summary+...+written-<digest>.json)."),
    written_first: bool = option(RerankConfig, "written_first", help="--candidates features, with --written: the "
                                 "written answer, where it links to a candidate, first (with the share it was right "
                                 "in the fit's questions); the two stages order the rest."),
    written_only: bool = option(RerankConfig, "written_only", help="With --written-first: where the written answer "
                                "links to a candidate, no name scores (the first stage orders the rest)."),
    written_mix: bool = option(RerankConfig, "written_mix", help="With --written-first: the written answer's "
                               "candidate takes its place by the share it was right among the counted "
                               "probabilities, instead of always first."),
    max_eval_samples: Optional[int] = option(RerankConfig, "max_eval_samples", help="Debug: the first N questions."),
    executor: str = option(ExecutorConfig, "executor", help="The LLM's name scores: local (this process) or ray "
                           "(batches of questions as tasks on a Ray cluster; the same rows, resumable)."),
    ray_address: Optional[str] = option(ExecutorConfig, "ray_address", help=RAY_ADDRESS_HELP),
):
    """Who answers re-ranked by a local LLM reading the passages: the run's top-k characters scored by each name's
    log-likelihood, combined with the network's calibrated probabilities by a weight fit on the other folds
    -> WS/runs/<run>/rerank@<model>+k<k>/ (resumable). `--candidates features` without a run judges the feature
    ranker on book folds of its own -> WS/runs/features+by-book/."""
    from whoqa.evaluation.rerank import rerank as rerank_run
    cfg = RerankConfig(base=reader_base, top_k=top_k, candidates=candidates, prompt_tokens=prompt_tokens,
                       folds=folds, fold_seed=fold_seed, llm_features=llm_features, rendering=rendering, marks=marks,
                       character_list=character_list, runtime=runtime, cast=cast, stage1=stage1,
                       shot_policy=shot_policy, written=written, written_first=written_first,
                       written_only=written_only, written_mix=written_mix, max_eval_samples=max_eval_samples)
    report = stage(rerank_run, workspace, run, cfg, device=device, executor=ExecutorConfig(executor, ray_address))
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
    c = stage(compare, workspace, a, b)
    for name, f in zip(("A", "B"), c["figures"]):
        typer.echo(f"{name}: P@1 {f['p@1']:6.2f}  P@5 {f['p@5']:6.2f}  MRR {f['mrr']:.3f}  ECE "
                   + (f"{f['ece']:.3f}" if f.get("ece") is not None else "-"))
    d = c["paired"]["difference"]
    typer.echo(f"A - B on {c['questions']} questions of {c['paired']['books']} books: " + "; ".join(
        f"{k} {v['mean']:+.3f} (95% {v['ci95'][0]:+.3f} to {v['ci95'][1]:+.3f})" for k, v in d.items()))
