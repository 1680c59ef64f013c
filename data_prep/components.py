"""The book engine's parts, chosen by name (as spaCy's and BookNLP's components are): ENGINES and RESOLVERS.

Why: a new engine or pronoun resolver is one entry here plus its module. `prepare --engine/--resolver`,
`eval-coref --resolver` and their help read the names from these dicts; the entry's identity is what `prepare` records
beside each book (`engine_identity`), so a book made by another engine or resolver is redone, never mixed in.

An engine entry makes the engine from the prepare config and the resolver's entry; the engine has `process_text(text) -> Processed` (rows
whoqa writes) or, with `writes_files`, `process_file(text, book_id, folder) -> stats` (it writes BookNLP's files).
A resolver entry's `make(tokens, names, genders, counts, weights)` returns an object with `run()` (the resolved
pronouns), `groups()`, `quotes` and `decisions` (data_prep.coref.Resolver is the reference); its `evaluate(engine,
docs, parsed, mentions=...) -> (predicted mentions per document, info)` is what `eval-coref` scores (default: the engine with this
resolver on every document). A resolver without `make` is for `eval-coref` only (it is trained per fold there).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from whoqa.core.registry import Registry


@dataclass(frozen=True)
class EngineEntry:
    make: Callable  # (PrepareConfig, ResolverEntry) -> engine
    about: str
    version: str = "1"  # raise it when the engine's output changes for the same text


@dataclass(frozen=True)
class ResolverEntry:
    make: Callable | None  # (tokens, names, genders, counts, weights) -> resolver; None: eval-coref only
    about: str
    evaluate: Callable | None = None  # eval-coref's predictions(engine, docs, parsed, mentions=); None: the engine
    #                                   with this resolver
    version: str = "1"


@dataclass(frozen=True)
class Lazy:
    """A function imported when first called (the registry is read by `--help`, which must not load spaCy); it
    pickles as its name, so worker processes receive the entries the parent looked up."""
    module: str
    attr: str

    def __call__(self, *args, **kwargs):
        return getattr(importlib.import_module(self.module), self.attr)(*args, **kwargs)


def _spacy(cfg, resolver_entry) -> object:
    from pathlib import Path

    from data_prep.coref_learn import learned_weights
    from data_prep.engine_spacy import SpacyEngine
    return SpacyEngine(weights=learned_weights(Path(cfg.coref_weights)) if cfg.coref_weights else None,
                       resolver=resolver_entry.make, resolver_name=cfg.resolver, processes=cfg.parse_processes)


def _booknlp(cfg, resolver_entry) -> object:
    from data_prep.engine_booknlp import BookNLPEngine
    return BookNLPEngine(python=cfg.booknlp_python, models=cfg.booknlp_models)


def _learned(engine, docs, parsed, mentions: str = "coreferee"):
    return Lazy("data_prep.coref_learn", "cross_validated_predictions")(engine, docs, parsed)


def _coreferee(engine, docs, parsed, mentions: str = "coreferee"):
    return Lazy("data_prep.coref_peer", "cross_validated_predictions")(engine, docs, parsed, mentions=mentions)


ENGINES: Registry = Registry("engine", {
    "spacy": EngineEntry(_spacy, "the offline engine: spaCy's parse, name clusters, the pronoun resolver"),
    "booknlp": EngineEntry(_booknlp, "the real BookNLP (its own Python: --booknlp-python, --booknlp-models)"),
})

RESOLVERS: Registry = Registry("resolver", {
    "rules": ResolverEntry(Lazy("data_prep.coref", "Resolver"),
                           "hand-set weights (or --coref-weights FILE), the engine's default"),
    "learned": ResolverEntry(None, "weights learned on LitBank, 5-fold cross-validated by document", _learned),
    "coreferee": ResolverEntry(None, "the peer (Hudson), trained on the same folds; whoqa[coref]", _coreferee),
})
DEFAULT_RESOLVER = "rules"


def engine(name: str) -> EngineEntry:
    return ENGINES.entry(name)


def resolver(name: str, for_prepare: bool = False) -> ResolverEntry:
    """The entry of a resolver name; one that only `eval-coref` can run is refused for `prepare`."""
    entry = RESOLVERS.entry(name)
    if for_prepare and entry.make is None:
        raise ValueError(f"resolver {name!r} is for `whoqa eval-coref` only (trained per fold there); `prepare` "
                         f"takes {', '.join(n for n, e in RESOLVERS.items() if e.make is not None)}")
    return entry


def identity(engine_name: str, resolver_name: str) -> dict:
    """What made a book beyond its weights file: the engine and, when not the default, the resolver and versions (the
    default's record stays as it always was, so books made before this registry are not redone)."""
    out = {"engine": engine(engine_name) and engine_name}
    if ENGINES[engine_name].version != "1":
        out["engine_version"] = ENGINES[engine_name].version
    if resolver_name != DEFAULT_RESOLVER:
        out["resolver"] = resolver_name
        out["resolver_version"] = resolver(resolver_name, for_prepare=True).version
    return out


def evaluate_resolver(folder, name: str, max_docs: int | None = None, mentions: str = "coreferee") -> dict:
    """`eval-coref`: a resolver scored on LitBank's documents: its own evaluation (trained per document fold), or
    the spaCy engine with it resolving."""
    from functools import partial

    from data_prep.engine_spacy import SpacyEngine
    from data_prep.litbank import evaluate, rule_predictions
    entry = resolver(name)
    if entry.evaluate is not None:
        return evaluate(folder, max_docs, predictions=partial(entry.evaluate, mentions=mentions))
    return evaluate(folder, max_docs, engine=SpacyEngine(resolver=entry.make, resolver_name=name),
                    predictions=rule_predictions)
