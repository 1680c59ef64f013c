"""The `whoqa` command, assembled from whoqa/cli/: one module per group of commands, each command a thin shell over
one Python function (it builds that function's config from its options, their defaults and help read from the
config dataclasses by whoqa.cli.util.option, and prints the result); answers are drawn by whoqa.answer_view."""
from __future__ import annotations

import logging

import typer

from whoqa.cli import (ask, bench, choice, data, evaluate, litbank, measure, models, reader, rerank, slots, train,
                       workspace)
from whoqa.cli.util import DEBUG, VERBOSE
from whoqa.core.seed import reexec_with_fixed_hash_seed

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="Question answering over full-length books (NarrativeQA full-story setting).")


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
         debug: bool = typer.Option(False, "--debug", help="Show the traceback of expected errors too.")):
    DEBUG["on"] = debug
    VERBOSE["on"] = verbose
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import warnings
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")


# `whoqa --help` lists the commands in this order: the stages from data to answers, the evaluations, then the groups
for module in (data, train, ask, models, rerank, choice, measure, workspace, evaluate, litbank):
    app.add_typer(module.app)
app.add_typer(slots.app, name="slots")
app.add_typer(reader.app, name="reader")
app.add_typer(bench.app, name="bench")


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
