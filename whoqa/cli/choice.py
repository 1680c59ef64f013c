"""`whoqa choice-rows` and `fit-choice`: the Who ranking in which the reader chooses among the people its passages
mention (whoqa.evaluation.choice_rows, whoqa.evaluation.choice_fit)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from whoqa.cli.util import stage
from whoqa.evaluation.choice_fit import READERS_WEIGHT, SERVED_ARM
from whoqa.ranker.reader_choice import SHIPPED_CHOICE

app = typer.Typer()


@app.command("choice-rows")
def choice_rows(
    workspace: Path = typer.Option(..., help="A workspace: its Who set's questions (after `whoqa prepare` and "
                                             "`whoqa index`), or with --questions the books those are about."),
    out: Path = typer.Option(..., help="The rows (.jsonl.gz), appended to: the questions it holds are kept."),
    questions: Optional[Path] = typer.Option(None, help="Readers' questions (data_prep/readers/questions.tsv): their "
                                                        "Who rows instead of the workspace's Who set."),
    books: Path = typer.Option(Path("../shared/data/books-unlabeled"), help="With --questions: the folder of the "
                                                                           "books (BOOKS/<id>.txt)."),
    written: Optional[Path] = typer.Option(None, help="The written answers already made for these questions (rows "
                                                      "with key and linked); else the reader writes them here."),
    also_top: int = typer.Option(0, help="Also score the counts' first K people (the shipped feature ranker's first "
                                         "stage), whether the passages mention them or not."),
    votes: bool = typer.Option(False, help="Instead of rows, each question's votes: every passage read on its own, "
                                           "the reader's choice among the people it mentions."),
):
    """Per Who question, what a choice ranking reads, made as `ask` makes it: the reader's scores of every person its
    passages mention, the counts' features, the written answer's link, the right answers (resumable)."""
    from whoqa.evaluation.choice_rows import make_rows
    n = stage(make_rows, workspace, out, questions, books, written, True, also_top, votes)
    typer.echo(f"{n} rows in {out}")


@app.command("fit-choice")
def fit_choice(
    nqa: Path = typer.Option(..., help="`choice-rows` of the shared books' Who set."),
    readers: Path = typer.Option(..., help="`choice-rows` of the readers' questions."),
    arm: str = typer.Option(SERVED_ARM, help="The features fit and shipped (whoqa.evaluation.choice_fit.ARMS)."),
    reader: Optional[str] = typer.Option(None, help="The LLM that chose and wrote in the rows (default: the registry's best answer writer)."),
    passages: str = typer.Option("pool", help="The passages' fusion the rows were read from."),
    ship: Optional[Path] = typer.Option(None, help=f"Write the arm's fit here (the served one: {SHIPPED_CHOICE.name} "
                                                   "beside whoqa.ranker)."),
    report: Optional[Path] = typer.Option(None, help="Every arm's figures and ranks as JSON."),
    readers_weight: int = typer.Option(READERS_WEIGHT, help="How many times each readers' fit-half question counts "
                                                            "beside a NarrativeQA one."),
    nqa_votes: Optional[Path] = typer.Option(None, help="`choice-rows --votes` of the shared books' Who set: the "
                                                        "votes' arms too."),
    readers_votes: Optional[Path] = typer.Option(None, help="`choice-rows --votes` of the readers' questions."),
):
    """Every arm by book-level CV on NarrativeQA's Who questions (fold seeds 13/14/15), on the readers' fit half
    (leave one book out) and on their check half (reported only); with --ship, the arm's fit on all but the check
    half."""
    from whoqa.evaluation.choice_fit import fit_choice as run, lines
    table = stage(run, nqa, readers, arm, reader, passages, ship, report, readers_weight, nqa_votes,
                  readers_votes)
    typer.echo("\n".join(lines(table)))
