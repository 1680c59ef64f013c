"""Every default is declared once, in its config dataclass: each CLI option that mirrors a config field shows the
field's default (a hand-typed default that drifted from the dataclass fails here)."""
import typer

import cli
from data_prep.prepare import PrepareConfig
from whoqa.evaluation.evaluate import EvalConfig
from whoqa.memnet.config import PretrainConfig, TrainConfig
from whoqa.reader.config import LLMConfig, LookupConfig, PrereadConfig, ReaderConfig
from whoqa.retrieval.bert_ranker import RankerConfig
from whoqa.retrieval.bm25f import RetrievalConfig

SAME, ONLY = True, False  # SAME: options named as a field mirror it too; ONLY: just the listed options
MIRRORS = {  # command -> [(config, which options, {option: field})]
    "prepare": [(PrepareConfig, SAME, {})],
    "index": [(RetrievalConfig, SAME, {}), (RankerConfig, ONLY, {"bert_base": "base", "bert_folds": "folds",
                                                                 "bert_pool": "pool", "bert_epochs": "epochs",
                                                                 "seed": "seed"})],
    "pretrain": [(PretrainConfig, SAME, {})],
    "train": [(TrainConfig, SAME, {})],
    "reader preread": [(PrereadConfig, SAME, {})],
    "reader lookup": [(LookupConfig, SAME, {})],
    "reader train": [(ReaderConfig, SAME, {"beams": "num_beams"})],
    "reader llm": [(LLMConfig, SAME, {"passage_order": "order", "reader_base": "base"})],
    "eval": [(EvalConfig, SAME, {})],
    "ablation": [(TrainConfig, ONLY, {"folds": "folds", "epochs": "epochs", "device": "device"})],
}


def options(name):
    command = typer.main.get_command(cli.app)
    for part in name.split():  # "reader train": a command of the `reader` group
        command = command.commands[part]
    return {p.name: p.default for p in command.params}


def test_cli_defaults_are_the_dataclass_defaults():
    import dataclasses
    checked, bad = 0, []
    for name, mirrors in MIRRORS.items():
        opts = options(name)
        for cls, same, mapping in mirrors:
            fields = cls.__dataclass_fields__
            pairs = dict(mapping)
            if same:
                pairs |= {o: o for o in opts if o in fields and o not in pairs}
            for opt, field in pairs.items():
                f = fields[field]
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    continue  # required (data, workspace)
                checked += 1
                if opts[opt] != cli.default(cls, field):
                    bad.append(f"whoqa {name} --{opt.replace('_', '-')}: {opts[opt]!r} != {cls.__name__}.{field} "
                               f"{cli.default(cls, field)!r}")
    assert checked > 40 and not bad, bad


def test_the_check_sees_a_drifted_default(monkeypatch):
    monkeypatch.setattr(PretrainConfig.__dataclass_fields__["hops"], "default", 7)
    assert cli.default(PretrainConfig, "hops") == 7 != options("pretrain")["hops"]
