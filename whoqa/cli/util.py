"""What every command module shares: options built from config fields (their default declared once, in the
dataclass), the one-line handling of a stage's expected errors, and the global --verbose/--debug flags."""
from __future__ import annotations

import dataclasses
import json

import typer

from whoqa.answer_view import Line, shown
from whoqa.core.device import DEVICES
from whoqa.core.disk import disk_error

DEVICE_HELP = f"{DEVICES} (auto: a GPU when there is one)"
DEFAULT_DATA = "../shared/data"
RAY_ADDRESS_HELP = "With --executor ray: the cluster (auto, HOST:PORT; default $RAY_ADDRESS, else auto)."
DEBUG = {"on": False}
VERBOSE = {"on": False}  # `whoqa --verbose CMD`: the libraries' messages and the answers' internals too


def default(cls, name: str):
    """A config field's default, declared once in its dataclass: the CLI never restates it."""
    f = cls.__dataclass_fields__[name]
    return f.default_factory() if callable(f.default_factory) else f.default


def option(cls, name: str, *param_decls: str, **kwargs) -> typer.models.OptionInfo:
    """A typer option built from the config field cls.name: its default is the field's (never typed here), and the
    option remembers the field (`.field`), so tests/test_cli_defaults.py checks every one of them."""
    f = cls.__dataclass_fields__[name]
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        raise TypeError(f"{cls.__name__}.{name} has no default to build an option from")
    info = typer.Option(default(cls, name), *param_decls, **kwargs)
    info.field = (cls, name)
    return info


def fail(msg: str) -> None:
    typer.secho(f"error: {shown(msg)}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def stage(fn, *args, **kwargs):
    """Run a stage; its expected errors (missing file or earlier stage, bad data or option, stale model, NaN loss) end
    the command with their one-line message and exit 2 instead of a traceback."""
    from whoqa.core.errors import DataError  # (a stale model, whoqa.memnet.checkpoint.StaleModel, a damaged
    # artifact, whoqa.core.artifacts.DamagedArtifact, and a damaged book file are ValueErrors)
    try:
        return fn(*args, **kwargs)
    except (FileNotFoundError, ValueError, RuntimeError, FloatingPointError, DataError) as e:
        if DEBUG["on"]:
            raise
        fail(str(e))
    except OSError as e:  # the disk, not the data: full, read-only, not ours to write (whoqa.core.disk)
        line = disk_error(e)
        if DEBUG["on"] or line is None:
            raise
        fail(line)


def echo_json(out) -> None:
    typer.echo(json.dumps(out, indent=1))


def echo_lines(lines: list[Line]) -> None:
    """Lines of whoqa.answer_view on the terminal: stdout or stderr, warnings in yellow."""
    for line in lines:
        if line.color:
            typer.secho(line.text, fg=line.color, err=line.err)
        else:
            typer.echo(line.text, err=line.err)

