"""Every default is declared once, in its config dataclass: the CLI's options are built from the fields
(whoqa.cli.util.option), and this walks every command of `whoqa` and compares each such option's default with its
field's now; an option that shadows a field of its command's configs by name without being built from it (a
hand-typed default, free to drift) fails too, unless it is listed below with its reason."""
import dataclasses
import inspect

import typer

import cli
from whoqa.cli.util import default
from whoqa.memnet.config import PretrainConfig, TrainConfig

# command -> options named like a field of the command's configs that deliberately are not that field's
NOT_THE_FIELD = {
    "ablation": {"trials",  # the paper's figures: 1 trial per fold, not TrainConfig's 5
                 "ranker"},  # a list of rankers, default every one indexed, not one run's
}


def commands(app=None, path=()):
    """(name, callback) of every command of the `whoqa` app, groups included ("reader train")."""
    app = app or cli.app
    for info in app.registered_commands:
        yield " ".join([*path, info.name or info.callback.__name__.replace("_", "-")]), info.callback
    for group in app.registered_groups:
        yield from commands(group.typer_instance, (*path, group.name) if group.name else path)


def click_params(name):
    command = typer.main.get_command(cli.app)
    for part in name.split():  # "reader train": a command of the `reader` group
        command = command.commands[part]
    return {p.name: p for p in command.params}


def drift():
    """(options checked, commands with options built from fields, mismatches)."""
    checked, built, bad = 0, set(), []
    for name, callback in commands():
        params = click_params(name)
        infos = {n: p.default for n, p in inspect.signature(callback).parameters.items()}
        fields = {i.field for i in infos.values() if hasattr(i, "field")}
        for opt, info in infos.items():
            if hasattr(info, "field"):
                cls, field = info.field
                checked += 1
                built.add(name)
                if params[opt].default != default(cls, field):
                    bad.append(f"whoqa {name} --{opt.replace('_', '-')}: {params[opt].default!r} != "
                               f"{cls.__name__}.{field} {default(cls, field)!r}")
            elif opt not in NOT_THE_FIELD.get(name, ()):
                for cls in {c for c, _ in fields}:
                    f = cls.__dataclass_fields__.get(opt)
                    if f and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING):
                        bad.append(f"whoqa {name} --{opt.replace('_', '-')}: typed by hand, not built from "
                                   f"{cls.__name__}.{opt}")
    return checked, built, bad


def test_cli_defaults_are_the_dataclass_defaults():
    checked, built, bad = drift()
    assert not bad, bad
    assert checked > 100, checked
    assert {"prepare", "index", "pretrain", "train", "reader preread", "reader lookup", "reader train", "reader llm",
            "eval", "ablation", "ask", "chat", "rerank", "serve", "bench llm", "download"} <= built, built


def test_serve_restates_nothing_of_serve_config():
    from whoqa.web.config import ServeConfig
    _, callback = next(c for c in commands() if c[0] == "serve")
    infos = inspect.signature(callback).parameters.values()
    assert {getattr(p.default, "field", (None, None))[1] for p in infos} == set(ServeConfig.__dataclass_fields__)


def test_the_check_sees_a_drifted_default(monkeypatch):
    monkeypatch.setattr(PretrainConfig.__dataclass_fields__["hops"], "default", 7)
    monkeypatch.setattr(TrainConfig.__dataclass_fields__["epochs"], "default", 61)
    bad = drift()[2]
    assert any("whoqa pretrain --hops" in b for b in bad) and any("whoqa train --epochs" in b for b in bad), bad
