"""`whoqa eval-coref`, `eval-cast` and `train-coref`: the engine's characters, pronouns and cast against LitBank's
gold (data_prep.components, whoqa.evaluation.cast, data_prep.coref_learn)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from data_prep.components import DEFAULT_RESOLVER, RESOLVERS
from whoqa.cli.util import DEFAULT_DATA, fail, stage

app = typer.Typer()


@app.command("eval-coref")
def eval_coref(
    litbank: Path = typer.Option(Path(DEFAULT_DATA) / "litbank", help="LitBank coref folder (<name>.txt + .ann)."),
    max_docs: Optional[int] = typer.Option(None, help="Debug: only the first N documents."),
    out: Optional[Path] = typer.Option(None, help="Also write the JSON here."),
    resolver: str = typer.Option(DEFAULT_RESOLVER, help="; ".join(f"{n}: {e.about}" for n, e in RESOLVERS.items())
                                 + "."),
    mentions: str = typer.Option("coreferee", help="--resolver coreferee: coreferee (spaCy's PERSON entities and "
                                                   "pronouns in its chains), engine-names (the engine's names and "
                                                   "characters, each pronoun by coreferee) or engine-names+rules "
                                                   "(the rules deciding the pronouns coreferee links to no name)."),
):
    """Score the offline engine's characters and pronouns against LitBank's gold coreference (PER, names + pronouns)."""
    from data_prep import coref_peer
    from data_prep.components import evaluate_resolver
    if mentions not in coref_peer.MENTIONS:
        fail(f"unknown --mentions {mentions!r}: use {', '.join(coref_peer.MENTIONS)}")
    res = stage(evaluate_resolver, litbank, resolver, max_docs=max_docs, mentions=mentions)
    text = json.dumps(res, indent=1)
    typer.echo(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


@app.command("eval-cast")
def eval_cast(
    litbank: Path = typer.Option(Path(DEFAULT_DATA) / "litbank", help="LitBank coref folder (<name>.txt + .ann)."),
    max_docs: Optional[int] = typer.Option(None, help="Debug: only the first N documents."),
    out: Optional[Path] = typer.Option(None, help="Also write the JSON here."),
    labels: Optional[Path] = typer.Option(None, help="Instead of LitBank: hand labels of whole novels' name clusters "
                                                     "(data_prep/readers/cast_labels.tsv), scored in --workspace."),
    workspace: Path = typer.Option(Path("ws-readers"), help="With --labels: the workspace the novels are taken into."),
    books: Path = typer.Option(Path("../shared/data/books-unlabeled"), help="With --labels: the novels' folder."),
    fit_person: bool = typer.Option(False, "--fit-person", help="With --labels: also fit the person rule (a logistic "
                                    "rule over how the book uses a name) on the fit half of split.tsv and score both "
                                    "halves with it (not served: the cast is the rules')."),
):
    """Score a book's cast (the people among its characters, merged) against LitBank's gold named people: precision
    and recall, beside those of the characters before the cast. With --labels, whole novels' casts against hand
    labels: the share of the 40 most mentioned that are people, and the same-person clusters merged."""
    from whoqa.evaluation.cast import evaluate_cast, evaluate_labels, fit_person as fit
    if fit_person and not labels:
        fail("--fit-person fits on hand labels: give --labels data_prep/readers/cast_labels.tsv")
    if labels:
        res = stage(fit, workspace, labels, books) if fit_person else stage(evaluate_labels, workspace, labels, books)
    else:
        res = stage(evaluate_cast, litbank, max_docs)
    text = json.dumps(res, indent=1)
    typer.echo(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


@app.command("train-coref")
def train_coref(
    litbank: Path = typer.Option(Path(DEFAULT_DATA) / "litbank", help="LitBank coref folder (<name>.txt + .ann)."),
    out: Path = typer.Option(Path("coref_weights.json"), help="Where to write the learned weights (the package's "
                                                              "own: data_prep/resources/coref_weights.json)."),
    max_docs: Optional[int] = typer.Option(None, help="Debug: only the first N documents."),
):
    """Learn the pronoun resolver's weights from LitBank-format gold coreference (a mention-ranking model over the
    engine's features); `whoqa eval-coref --resolver learned` measures them cross-validated by document."""
    from data_prep.coref_learn import train
    rec = stage(train, litbank, out, max_docs)
    typer.echo(f"learned from {rec['pronouns']} pronouns of {rec['documents']} documents (loss {rec['loss_first']} -> "
               f"{rec['loss_last']}) -> {out}")
