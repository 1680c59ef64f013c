"""`whoqa check`, `serve` and `sample-questions`: a workspace checked (whoqa.evaluation.doctor), served as a web page
(whoqa.web, its options built from ServeConfig), and its artificial questions sampled for a person to judge."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from whoqa.cli.util import DEVICE_HELP, fail, option, stage
from whoqa.core.seed import SEED
from whoqa.web.config import ServeConfig

app = typer.Typer()


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
    n, found = stage(check, workspace)
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
    workspace: Optional[Path] = option(ServeConfig, "workspace", help="Workspace to serve (books, trained models; "
                                       "default: the data folder `whoqa ask` keeps books in, $WHOQA_HOME or e.g. "
                                       "~/.local/share/whoqa, made when missing)."),
    host: str = option(ServeConfig, "host", help="Address to bind (any other than 127.0.0.1 prints a warning)."),
    port: int = option(ServeConfig, "port", help="Port."),
    read_only: bool = option(ServeConfig, "read_only", help="Serve a shared workspace: no uploads."),
    max_upload_mb: float = option(ServeConfig, "max_upload_mb", help="Largest book file accepted, in MB."),
    device: str = option(ServeConfig, "device", help=f"Where the models run: {DEVICE_HELP}."),
    llm: Optional[str] = option(ServeConfig, "llm", help="The local LLM that reads (default: the best measured one "
                                                         "installed)."),
    allow_host: List[str] = option(ServeConfig, "allow_hosts", help="Another Host name the page may be reached by "
                                   "(e.g. behind a proxy); requests naming any other host are refused."),
    warm: bool = option(ServeConfig, "warm", help="Load the reading models when the page starts and once a book is "
                                                  "in, so the first answer waits for none."),
):
    """A web page for the workspace's books: the cast and where each character appears, answers by the same route
    as `whoqa ask` (which it names) with their evidence highlighted, uploads of new books; with its JSON API (/docs).
    Only the page itself can change the workspace: other sites' requests are refused."""
    from whoqa.core.workspace import default_home
    from whoqa.web.app import serve as run
    workspace = Path(workspace) if workspace is not None else default_home()
    if workspace.exists() and not workspace.is_dir():
        fail(f"workspace {workspace} is a file, not a folder: pass --workspace with a folder")
    if not workspace.is_dir():
        if read_only:
            fail(f"workspace {workspace} not found: ask about a book first (`whoqa ask BOOK QUESTION`), or pass "
                 f"--workspace")
        workspace.mkdir(parents=True)  # a new user's first page: uploads go where `ask` keeps books
    if not read_only and not os.access(workspace, os.W_OK):  # a read-only mount: say so now, not on the first upload
        fail(f"workspace {workspace} is not writable (a read-only disk, or another user's): serve it with "
             f"`whoqa serve --read-only`")
    typer.echo(f"whoqa: serving {workspace} on http://{host}:{port}/ (API docs: /docs){' read-only' if read_only else ''}")
    run(ServeConfig(workspace=str(workspace), host=host, port=port, read_only=read_only, max_upload_mb=max_upload_mb,
                    device=device, llm=llm, allow_hosts=list(allow_host), warm=warm))


@app.command("sample-questions")
def sample_questions(
    workspace: Path = typer.Option(Path("ws"), help="Workspace of `whoqa prepare`."),
    n: int = typer.Option(50, help="How many questions."),
    seed: int = typer.Option(SEED, help="Sampling seed."),
):
    """Print a random sample of artificial questions with their source sentence, for a person to judge."""
    from data_prep.artificial import sample
    for line in stage(sample, workspace, n, seed):
        typer.echo(line)
