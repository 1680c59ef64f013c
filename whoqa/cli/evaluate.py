"""`whoqa eval`, `ablation`, `failures`, `reproduce` and `score`: the tables, the paper's ablations, a run's misses,
the reported tables rerun, and text metrics (whoqa.evaluation)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from whoqa.cli.util import DEFAULT_DATA, DEVICE_HELP, echo_json, fail, option, stage
from whoqa.evaluation.evaluate import EvalConfig
from whoqa.memnet.config import TrainConfig

app = typer.Typer()


@app.command("eval")
def eval_(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    data: Optional[Path] = option(EvalConfig, "data", help="Evaluate on another NarrativeQA-layout folder's books "
                                                           "instead."),
    seed: int = option(EvalConfig, "seed", help="Seed of the random baseline (trial t uses seed + t)."),
    random_trials: int = option(EvalConfig, "random_trials", help="Trials of the random baseline."),
    jobs: int = option(EvalConfig, "jobs", help="Processes for preparing --data books."),
    reader_run: Optional[str] = typer.Option(None, help="Full task: reader run for non-Who questions (default: the "
                                                        "best cross-validated ROUGE-L)."),
    memnet_run: Optional[str] = typer.Option(None, help="Full task: memory-network run for Who questions (default: "
                                                        "the best cross-validated P@1)."),
    device: str = option(EvalConfig, "device", help=f"With --data: where the memory networks and readers run, "
                                                    f"{DEVICE_HELP}."),
    adapt: bool = option(EvalConfig, "adapt", help="With --data: also judge the final models after test-time "
                                                   "adaptation (cached per model and book)."),
    llm: Optional[str] = option(EvalConfig, "llm", help="With --data: the local LLM the served route reads with "
                                                        "(default: the best installed, as `ask`; none: without one)."),
    executor: str = option(EvalConfig, "executor", help="With --data: prepare and index its books locally or on a Ray "
                                                        "cluster (ray)."),
    ray_address: Optional[str] = option(EvalConfig, "ray_address",
                                        help="With --executor ray: the cluster (default $RAY_ADDRESS)."),
    kinds: str = option(EvalConfig, "kinds", help="With --data: the questions judged, who (the Who set), other (the "
                                                  "rest, answered as `ask` serves them: ROUGE-L, METEOR, BLEU-1, "
                                                  "the share answered) or both."),
    other_per_book: Optional[int] = option(EvalConfig, "other_per_book",
                                           help="With --data: judge each book's first N other questions only (a "
                                                "quicker measure, written to its own results files)."),
    passages: str = option(EvalConfig, "passages", help="With --data or --questions: how the served answers' passages "
                           "are retrieved: pool (MiniLM over BM25F's hits), rrf (BM25F and the whole book's MiniLM "
                           "vectors), bm25f, dense."),
    questions: Optional[Path] = typer.Option(None, help="Readers' questions (a TSV like data_prep/readers/"
                                                        "questions.tsv): answered as `ask` serves them, in WORKSPACE "
                                                        "(its books taken in from --books); Who P@1/P@5, other "
                                                        "answers shown and right, and each answer to read."),
    books: Path = typer.Option(Path("../shared/data/books-unlabeled"), help="With --questions: the folder of the "
                                                                            "books it names (<id>.txt)."),
    out: Optional[Path] = typer.Option(None, help="With --questions: write each judged answer here (.jsonl or "
                                                  ".jsonl.gz)."),
    half: Optional[str] = typer.Option(None, help="With --questions: only the books of this half of "
                                                  "data_prep/readers/split.tsv (fit or check)."),
    question_kinds: str = typer.Option("both", "--question-kinds", help="With --questions: who, other or both."),
):
    """Evaluate every system that exists on the Who set: P@1/P@5/MRR (Table 2) and ROUGE-L/BLEU/EM/F1; and, once a
    reader is trained, the full task (all questions; Who questions routed to the memory network). With --data, also
    what `ask` serves for the other questions: ROUGE-L/METEOR/BLEU-1 and the share answered. (The paper's
    ablations: `whoqa ablation`; a run's misses: `whoqa failures`.) With --questions, readers' own questions about
    whole novels, answered as `ask` serves them."""
    if questions is not None:
        from whoqa.evaluation.readers import evaluate_readers_questions
        res = stage(evaluate_readers_questions, workspace, questions, books, llm, device, out, True, passages, half,
                    question_kinds)
        typer.echo(res["by_eye"] + "\n\n" + res["table"])
        return
    from whoqa.evaluation.evaluate import evaluate
    res = stage(evaluate, EvalConfig(workspace=str(workspace), data=str(data) if data else None, seed=seed,
                                     random_trials=random_trials, jobs=jobs, device=device, adapt=adapt, llm=llm,
                                     executor=executor, ray_address=ray_address, kinds=kinds, passages=passages,
                                     other_per_book=other_per_book))
    typer.echo(res["table"])
    if res.get("full_task"):
        typer.echo("\n" + res["full_task"]["table"])
    if not data:
        from whoqa.evaluation.fulltask import evaluate_full_task
        full = stage(evaluate_full_task, workspace, reader_run, memnet_run)
        typer.echo("\n" + full["table"] if full else "full task: no reader run yet (`whoqa reader train`)")
    typer.echo(f"results: {workspace}/results/")


@app.command()
def ablation(
    kind: str = typer.Argument(..., help="P@1 against hops, context, pretrain-fraction or pretrain-epochs."),
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare` and `whoqa index`."),
    ranker: Optional[List[str]] = typer.Option(None, help="Rankers (default: all indexed)."),
    trials: int = typer.Option(1, help="Trials per fold (paper: 5)."),  # the figures' own, not TrainConfig's
    folds: int = option(TrainConfig, "folds", help="Folds."),
    epochs: int = option(TrainConfig, "epochs", help="Training epochs."),
    seed: int = option(TrainConfig, "seed", help="Seed."),
    device: str = option(TrainConfig, "device", help=f"Where the networks train: {DEVICE_HELP}."),
):
    """The paper's ablations (Figures 3-6) in its configuration: P@1 of the memory network against one setting ->
    WS/results/ablation-<kind>.png."""
    from whoqa.evaluation.evaluate import available_rankers
    from whoqa.memnet.ablation import run_ablation
    rankers = list(ranker or available_rankers(workspace))
    if not rankers:
        fail(f"no contexts in {workspace}/contexts: run `whoqa index --workspace {workspace}` first")
    base = TrainConfig(folds=folds, trials=trials, epochs=epochs, seed=seed,
                       from_pretrained=kind not in ("hops", "context"),
                       salience=False, device=device)  # the paper's figures, so its configuration
    res = stage(run_ablation, workspace, kind, rankers, base)
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
    typer.echo(format_report(stage(failure_report, workspace, run)))


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
    spec = stage(rp.load, name)
    if dry_run:
        for args in rp.commands(spec, str(data), ws):
            typer.echo("whoqa " + " ".join(args))
        return
    import subprocess
    import sys

    from whoqa.cli.util import DEBUG, VERBOSE
    from whoqa.core.seed import fixed_hash_seed_env
    flags = ["--verbose"] * VERBOSE["on"] + ["--debug"] * DEBUG["on"]

    def invoke(args):  # each step a `whoqa` process of its own: a native crash in one is seen, and run again
        with fixed_hash_seed_env():
            return subprocess.run([sys.executable, "-c", "from cli import entry; entry()", *flags, *args]).returncode
    out = stage(rp.run, name, str(data), ws, invoke, typer.echo, check)
    again = f" ({out['steps_run_again']} step(s) killed by a signal and run again)" if out["steps_run_again"] else ""
    typer.echo(f"reproduction {name}: {out['seconds']:.0f}s -> {ws}{again}")
    if check:
        bad = [r for r in out["check"] if not r["ok"]]
        for r in out["check"]:
            key = r["metric"] if isinstance(r["metric"], str) else " > ".join(r["metric"])
            typer.echo(f"{'ok  ' if r['ok'] else 'FAIL'} {r['file']} {key}: {r['got']} "
                       f"(expected {r['value']} +- {r['tolerance']}{'; ' + r['note'] if 'note' in r else ''})")
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
    from whoqa.core.text import read_text
    for p in [pred, *ref]:
        if not p.is_file():
            fail(f"{p} not found")
    preds = read_text(pred).splitlines()  # a missing final newline counts no differently
    refs = [read_text(r).splitlines() for r in ref]
    if not preds:
        fail(f"{pred} has no lines: one answer per line")
    for r, path in zip(refs, ref):
        if len(r) != len(preds):
            fail(f"{path} has {len(r)} lines but {pred} has {len(preds)}: one answer per line in each file")
    echo_json(text_metrics(preds, [list(x) for x in zip(*refs)], normalize=not raw))
