"""`whoqa ask` and `whoqa chat`: a book and a question through whoqa.service, the answer drawn by
whoqa.answer_view."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from whoqa import answer_view as view
from whoqa.cli.util import DEVICE_HELP, VERBOSE, echo_lines, fail, option, stage
from whoqa.core.progress import Stages
from whoqa.core.text import BOOK_FORMATS
from whoqa.retrieval.passages import PassageConfig
from whoqa.service import ServiceConfig

app = typer.Typer()
WORKSPACE_HOME_HELP = ("Workspace: where books are kept once processed, and the models that serve (default: "
                       "$WHOQA_HOME, else your data folder, e.g. ~/.local/share/whoqa).")
VERBOSE_HELP = ("Also show the libraries' own messages and the answer's internals: the route and why it was chosen, "
                "the calibration, the language model's own share (on stderr).")
UPTO_HELP = ("No spoilers: answer from the book only up to this point, a share of it (\"40%\") or a chapter "
             "heading (\"Chapter 12\": the text before that heading).")
PASSAGES_HELP = ("How other questions' passages are found: pool (the sentence vectors of the best BM25F hits, made as "
                 "a question needs them), rrf (BM25F fused with the whole book's sentence vectors, made once a book), "
                 "bm25f, dense.")
QUICK_HELP = ("Who questions: count only (how the book mentions each person, and a small model's vote), not the "
              "reader writing the answer from the passages: about 4x faster, right first 26.9% of the time instead "
              "of 32.6% on books whoqa never trained on.")
QUIT = {"quit", "exit", "q", ":q"}


@app.command()
def ask(
    book_or_question: str = typer.Argument(..., metavar="BOOK", help=f"A book file ({BOOK_FORMATS}) or the id of a "
                                                                     "book already in the workspace; processed once."),
    question: Optional[str] = typer.Argument(None, metavar="QUESTION", help="A question, e.g. \"Who helps Emily "
                                                                              "escape?\""),
    book: Optional[str] = typer.Option(None, help="Instead of BOOK: the document id of a prepared book (or, with "
                                                  "--data, of that folder)."),
    text: Optional[Path] = typer.Option(None, help=f"Instead of BOOK: a book file ({BOOK_FORMATS}; a Project "
                                                   "Gutenberg header and licence are removed)."),
    data: Optional[Path] = typer.Option(None, help="With --book: a NarrativeQA folder holding that book, prepared into "
                                                   "the workspace the first time."),
    workspace: Optional[Path] = typer.Option(None, help=WORKSPACE_HOME_HELP),
    route: str = typer.Option("auto", help="auto (the route the workspace measured best; --verbose prints it with its "
                                           "reason), or one of network, features (Who), reader, llm (other "
                                           "questions)."),
    top: int = option(ServiceConfig, "top", help="Characters to show."),
    out: Optional[Path] = typer.Option(None, help="Also write the answer as JSON (Answer.to_json) to this file (a folder: a file inside it, named for the book "
                          "and the question)."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON only (the web API's schema)."),
    model: Optional[str] = option(ServiceConfig, "model",
                                  help="Memory network under WS/models (default: the best cross-validated)."),
    reader_model: Optional[str] = option(ServiceConfig, "reader_model",
                                         help="FiD reader under WS/models/reader (default: the best)."),
    llm: Optional[str] = option(ServiceConfig, "llm", help="The local LLM that reads (folder, hub id, .gguf file or a "
                                                           "packaged model; default: the best measured one installed)."),
    device: str = option(ServiceConfig, "device", help=f"Where the models run: {DEVICE_HELP}."),
    upto: Optional[str] = typer.Option(None, help=UPTO_HELP),
    passages: str = option(PassageConfig, "fusion", help=PASSAGES_HELP),
    quick: bool = typer.Option(not ServiceConfig.reading, "--quick", help=QUICK_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
):
    """Ask a book a question: `whoqa ask BOOK "QUESTION"` with BOOK a book file or a book's id; or
    --book ID, --text FILE, --data DIR --book ID. Who questions: the book's characters ranked, with how sure it is and
    the sentences that mention the answer; other questions: a reader's answer and the passages it read."""
    from whoqa.service import Service, check_request
    given, book, question = book_and_question(book_or_question, question, book, text, data)
    cfg = ServiceConfig(device=device, llm=llm, model=model, reader_model=reader_model, top=top, reading=not quick,
                        passages=stage(PassageConfig, fusion=passages))
    question = stage(check_request, question, route, cfg)  # before a book is prepared for it
    svc = Service(home(workspace), cfg, stages=Stages(on=not as_json))
    verbose = verbose or VERBOSE["on"]
    if given is not None:
        book_id = stage(quietly, svc, verbose, svc.resolve, given)
    else:
        book_id = stage(quietly, svc, verbose, svc.intake, text, data, book)
    ans = stage(quietly, svc, verbose, svc.answer, book_id, question, route, upto)
    stage(show_answer, ans, out, as_json, text or (Path(given) if given and Path(given).is_file() else None), verbose)


@app.command()
def chat(
    book: str = typer.Argument(..., metavar="BOOK", help=f"A book file ({BOOK_FORMATS}) or the id of a book already "
                                                         "in the workspace; processed once."),
    workspace: Optional[Path] = typer.Option(None, help=WORKSPACE_HOME_HELP),
    upto: Optional[str] = typer.Option(None, help=UPTO_HELP),
    route: str = typer.Option("auto", help="As `whoqa ask --route`."),
    top: int = option(ServiceConfig, "top", help="Characters to show."),
    llm: Optional[str] = option(ServiceConfig, "llm", help="The local LLM that reads (default: the best measured one "
                                                           "installed)."),
    device: str = option(ServiceConfig, "device", help=f"Where the models run: {DEVICE_HELP}."),
    passages: str = option(PassageConfig, "fusion", help=PASSAGES_HELP),
    quick: bool = typer.Option(not ServiceConfig.reading, "--quick", help=QUICK_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
):
    """Talk with a book: questions one after another, each answered as `whoqa ask` answers it; the book and the models
    load once. Ctrl-D, Ctrl-C or "quit" ends it; arrow keys recall earlier questions (kept in WS/chat_history)."""
    from whoqa.service import Service
    verbose = verbose or VERBOSE["on"]
    svc = Service(home(workspace), ServiceConfig(device=device, llm=llm, top=top, reading=not quick,
                                                 passages=stage(PassageConfig, fusion=passages)), stages=Stages(on=True))
    book_id = stage(quietly, svc, verbose, svc.resolve, book)
    stage(quietly, svc, verbose, svc.vectors_later, book_id)  # (encoded while the reader types: other questions' search)
    history = line_history(Path(svc.ws, "chat_history"))
    typer.echo(f"Ask about {title(svc, book_id)}" + (f" (up to {upto})" if upto else "")
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
                ans = stage(quietly, svc, verbose, svc.answer, book_id, question, route, upto)
            except typer.Exit:  # the one-line error is shown; the next question may do better
                continue
            show_answer(ans, None, False, None, verbose)
            typer.echo("")
    except KeyboardInterrupt:
        pass
    finally:
        history()
    typer.echo("bye", err=True)


def show_answer(ans, out: Optional[Path], json_only: bool, text: Optional[Path], verbose: bool = False) -> None:
    """An Answer on the terminal as whoqa.answer_view draws it (as text, or as JSON only), and as JSON to `out`."""
    from whoqa.core.files import atomic_write
    if out is not None:
        out = answer_file(out, ans)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, view.as_json(ans))
    if json_only:
        typer.echo(view.as_json(ans))
        return
    echo_lines(view.as_text(ans, verbose, text))


def answer_file(out: Path, ans) -> Path:
    """Where `--out` writes an answer: the file named, or inside a folder named, a file named for the book and the
    question ("0d0bc014-who-does-glenister-fall-in-love-with.json")."""
    import re
    if not out.is_dir():
        return out
    slug = re.sub(r"[^a-z0-9]+", "-", ans.question.lower()).strip("-")[:48].rstrip("-") or "answer"
    return out / f"{ans.book[:8]}-{slug}.json"


def home(workspace: Optional[Path]) -> Path:
    from whoqa.core.workspace import default_home
    return workspace if workspace is not None else default_home()


def book_and_question(first: str, second: Optional[str], book: Optional[str], text: Optional[Path],
                      data: Optional[Path]) -> tuple[Optional[str], Optional[str], str]:
    """(BOOK as typed, --book/--text's, the question) from `ask BOOK QUESTION` or the older `ask --text FILE
    QUESTION` / `ask --book ID QUESTION`."""
    named = book is not None or text is not None
    if second is None:
        if not named:
            fail(f'name the book and the question: whoqa ask BOOK "QUESTION" (BOOK: a book file, {BOOK_FORMATS}, '
                 'or the id of a book already asked about)')
        return None, book, first
    if named:
        fail("name the book once: either whoqa ask BOOK QUESTION or --book/--text with only the question")
    return first, None, second


def quietly(svc, verbose: bool, fn, *args):
    """fn(*args) with the libraries' noise off the terminal unless verbose (whoqa.core.quiet), the stage line cleared
    before anything else is shown."""
    from whoqa.core.quiet import quiet
    with quiet(not verbose):
        try:
            return fn(*args)
        finally:
            svc.stages.done()


def line_history(path: Path):
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


def title(svc, book_id: str) -> str:
    """A book's title (for a book added from a file: whoqa.core.text.book_title), else its id's start."""
    from whoqa.core.store import load_texts
    try:
        kept = load_texts(svc.ws).get(book_id) or {}
        line = kept.get("title") or kept.get("first_line")
    except ValueError:  # a damaged record (DamagedArtifact): the id will do
        line = None
    return f"\"{line}\"" if line else f"book {book_id[:12]}"
