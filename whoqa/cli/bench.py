"""`whoqa bench`: benchmarks that print figures (JSON), one command per stage timed (docs/benchmarks.md)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from whoqa.cli.util import DEFAULT_DATA, echo_json, option, stage
from whoqa.ranker.config import RerankConfig
from whoqa.llm.config import LLMConfig
from whoqa.core.text import BOOK_FORMATS
from whoqa.web.config import ServeConfig

app = typer.Typer(no_args_is_help=True, help="Benchmarks that print figures (JSON): one command per stage timed. "
                  "Tables and how they were made: docs/benchmarks.md.")
WS_OPTION = typer.Option(Path("ws"), help="A workspace with prepared books.")


@app.command("prepare")
def bench_prepare(
    data: Path = typer.Option(DEFAULT_DATA, help="NarrativeQA-layout folder."),
    books: int = typer.Option(4, help="How many books (the shortest ones after --min-words)."),
    min_words: int = typer.Option(20000, help="Skip books shorter than this."),
    repeats: int = typer.Option(1, help="Runs per measurement (the median is reported)."),
):
    """The book engine: words/s in one process and with --jobs 2, peak RSS."""
    from data_prep.bench import run
    echo_json(run(str(data), books, min_words, repeats))


@app.command("parse")
def bench_parse(
    text: Path = typer.Option(..., help=f"A book file ({BOOK_FORMATS})."),
    processes: List[int] = typer.Option([1, 2], help="A count of processes to parse in (repeatable)."),
    repeats: int = typer.Option(3, help="Runs of each count, in turn (the median is reported)."),
):
    """One book's parse in 1 and in 2 processes: each run a fresh Python that loads the parser and parses the book
    once, as a first use does; medians, and whether every run gave the same parse."""
    from data_prep.bench import parse_run
    echo_json(stage(parse_run, str(text), list(processes), repeats))


@app.command("index")
def bench_index(workspace: Path = WS_OPTION):
    """Context selection: index build time, BM25F query latency p50/p95 and q/s, BERT ranking time per question."""
    from whoqa.evaluation.bench import run
    echo_json(stage(run, str(workspace)))


@app.command("ask")
def bench_ask(workspace: Path = WS_OPTION,
              route: str = typer.Option("auto", help="The route to time (auto: what `ask` chooses).")):
    """`ask` latency on the workspace's questions."""
    from whoqa.evaluation.bench import run_ask
    echo_json(stage(run_ask, str(workspace), route=route))


@app.command("new-book")
def bench_new_book(
    text: Path = typer.Option(..., help="A plain-text book the workspace has not seen."),
    workspace: Path = WS_OPTION,
    route: str = typer.Option("auto", help="The route to time (auto: what `ask` chooses)."),
    llm: Optional[str] = typer.Option(None, help="The local LLM that reads (default: the best installed)."),
    other: Optional[str] = typer.Option(None, help="Also time a first question that is not a Who question (e.g. "
                                                   "\"Where does the story take place?\"), after the Who answers."),
):
    """Time to the first answer about a new book: processed, the models loaded, then answered (with --other, what a
    first other answer adds after them)."""
    from whoqa.evaluation.bench import run_new_book
    echo_json(stage(run_new_book, str(workspace), str(text), route, llm, other=other))


@app.command("reader")
def bench_reader(workspace: Path = WS_OPTION):
    """The FiD reader: training examples/s, generation latency per question, peak memory."""
    from whoqa.core.distributed import world
    from whoqa.evaluation.bench import run_reader
    out = stage(run_reader, str(workspace))
    if world().main:
        echo_json(out)


@app.command("processes")
def bench_processes(workspace: Path = WS_OPTION):
    """Reader training and answering in the processes torchrun started (`torchrun --nproc_per_node N`)."""
    from whoqa.core.distributed import world
    from whoqa.evaluation.bench import run_processes
    out = stage(run_processes, str(workspace))
    if world().main:
        echo_json(out)


@app.command("llm")
def bench_llm(
    workspace: Path = WS_OPTION,
    reader_base: str = option(RerankConfig, "base", help="The model (folder, hub id, .gguf file or a packaged model)."),
    runtime: str = option(LLMConfig, "runtime", help="auto, transformers, llamacpp or llama-cpp-python."),
):
    """A local LLM: load time, prompt and generation tokens/s, memory."""
    from whoqa.evaluation.bench import run_llm
    echo_json(stage(run_llm, str(workspace), reader_base, runtime))


@app.command("serve")
def bench_serve(workspace: Path = WS_OPTION,
                text: Optional[Path] = typer.Option(None, help="Also upload this text and time it to the first "
                                                               "answer."),
                requests: int = typer.Option(80, help="Questions per setting about the workspace's longest book "
                                                      "(0: none; with --text, only the new book's first answer)."),
                warm: bool = typer.Option(ServeConfig.warm, "--warm/--no-warm",
                                          help="Load the models as the page starts (`serve`'s default).")):
    """The web app: ask latency with 1 and 8 clients, memory; with --text, upload to first answer."""
    from whoqa.web.bench import run_serve
    echo_json(stage(run_serve, str(workspace), text=str(text) if text else None, requests=requests, warm=warm))


@app.command("terminal")
def bench_terminal(
    book: Path = typer.Argument(..., help=f"A book file ({BOOK_FORMATS}), as a reader gives it to `ask`."),
    question: str = typer.Argument("Who is the main character?", help="The question asked."),
    workspace: Optional[Path] = typer.Option(None, help="Passed to `ask` (default: ask's own, WHOQA_HOME or the "
                                                        "user's data folder)."),
    other: Optional[str] = typer.Option(None, help="Also time this question that is not a Who question as the first "
                                                   "one about the book, each in a new data folder of its own (e.g. "
                                                   "\"Where does the story take place?\"): the two first answers and "
                                                   "their ratio."),
):
    """`whoqa ask BOOK QUESTION` in a pseudo-terminal, as a person runs it: time to the first visible output, each
    stage shown and when, and when the answer came. With --other, a first Who answer and a first other answer about
    the same new book, each from an empty data folder."""
    from whoqa.evaluation.bench import run_first_answers, run_terminal
    if other:
        echo_json(stage(run_first_answers, str(book), question, other))
    else:
        echo_json(stage(run_terminal, str(book), question, str(workspace) if workspace else None))
