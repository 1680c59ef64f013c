"""`whoqa measure-reader`: a reader measured before its Who answers carry probabilities
(whoqa.evaluation.measure_reader)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from whoqa.cli.util import stage
from whoqa.evaluation.measure_reader import QUESTIONS, SPLIT

app = typer.Typer()


@app.command("measure-reader")
def measure_reader(
    llm: str = typer.Option(..., help="The reader: a .gguf file, a model folder, a packaged model's name, or an "
                                      "OpenAI-compatible server's address (http://127.0.0.1:11434/v1)."),
    workspace: Optional[Path] = typer.Option(None, help="The workspace whose answers will use the fit (default: "
                                                        "`ask`'s, your data folder or $WHOQA_HOME)."),
    questions: Path = typer.Option(QUESTIONS, help="Readers' questions: the fit half is fit on, the check half "
                                                   "reported."),
    books: Path = typer.Option(Path("../shared/data/books-unlabeled"), help="The folder of the questions' books "
                                                                           "(BOOKS/<id>.txt)."),
    nqa: Optional[Path] = typer.Option(None, help="A workspace of the shared books (`whoqa prepare` + `whoqa index`): "
                                                  "its NarrativeQA Who questions are fit on too, with book-level CV."),
    split: Path = typer.Option(SPLIT, help="The readers' questions' fit/check halves by book."),
    limit: Optional[int] = typer.Option(None, help="The first N questions of each source only (a quick look; the "
                                                   "fit says so)."),
):
    """Measure a reader as the one that chooses among the passages' people: its choices on the readers' (and
    NarrativeQA's) Who questions, a fit written into the workspace with its figures and time; `ask` then gives that
    reader's Who answers probabilities."""
    from whoqa.cli.ask import home
    from whoqa.evaluation.measure_reader import measure_reader as run
    got = stage(run, home(workspace), llm, questions, books, nqa, split, limit)
    check = got["check_half"]
    typer.echo(f"{got['fit']}: check half P@1 {check['p@1']} / P@5 {check['p@5']} / MRR {check['mrr']} "
               f"({check['n']} questions); {got['seconds']:.0f} s")
