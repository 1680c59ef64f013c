"""The engine's parts are chosen by name: a resolver registered in one entry runs in `prepare` and `eval-coref`, is
recorded with the books it made, and a book made by another resolver is redone."""
import json

import pytest
from typer.testing import CliRunner

from cli import app
from data_prep import components
from data_prep.components import RESOLVERS, ResolverEntry
from data_prep.coref import Resolver
from tests.conftest import SHORT_BOOKS, build_mini_data, litbank_folder

run = CliRunner().invoke


class NamesOnly(Resolver):
    """A toy resolver: names stay, no pronoun is ever resolved."""

    def run(self):
        return []


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(RESOLVERS, "names-only", ResolverEntry(NamesOnly, "a toy: no pronoun resolved"))
    return "names-only"


def pronoun_mentions(ws, book):
    """The book's pronouns linked to a character (groups' "they" are PER entities, not characters)."""
    from whoqa.core.book import Book
    return sum(1 for m in Book.load(ws / "books" / book, book).mentions if m.prop == "PRON")


def test_a_registered_resolver_runs_in_prepare_and_books_made_otherwise_are_redone(toy, tmp_path, shared_data):
    data = build_mini_data(tmp_path / "data", shared_data)
    ws = tmp_path / "ws"
    common = ["prepare", "--data", str(data), "--workspace", str(ws), "--book", SHORT_BOOKS[0], "--jobs", "1",
              "--no-unlabeled", "--no-embeddings", "--no-artificial"]
    assert run(app, common).exit_code == 0
    assert pronoun_mentions(ws, SHORT_BOOKS[0]) > 0  # the default resolver links pronouns
    assert "resolver" not in json.loads((ws / "engine.json").read_text())  # the default's record as it always was
    r = run(app, common + ["--resolver", toy])
    assert r.exit_code == 0, r.output
    assert pronoun_mentions(ws, SHORT_BOOKS[0]) == 0  # redone by the toy
    report = json.loads((ws / "prepare_report.json").read_text())["report"]
    assert report["redone_engine_changed"] == [SHORT_BOOKS[0]]
    rec = json.loads((ws / "engine.json").read_text())
    assert rec["resolver"] == toy and rec["identity"]["resolver"] == toy


def test_a_registered_resolver_is_scored_by_eval_coref_and_names_are_checked(toy, tmp_path, shared_data):
    folder = litbank_folder(shared_data, tmp_path, ("1342_pride_and_prejudice_brat",), sentences=40)
    scores = {}
    for name in ("rules", toy):
        r = run(app, ["eval-coref", "--litbank", str(folder), "--resolver", name])
        assert r.exit_code == 0, r.output
        scores[name] = json.loads(r.output)
    assert scores[toy]["resolver"] == toy
    assert scores[toy]["pronoun_accuracy"] < scores["rules"]["pronoun_accuracy"]
    r = run(app, ["eval-coref", "--litbank", str(folder), "--resolver", "nonesuch"])
    assert r.exit_code == 2 and "unknown resolver 'nonesuch'" in r.output
    with pytest.raises(ValueError, match="for `whoqa eval-coref` only"):
        components.resolver("learned", for_prepare=True)
    assert toy in RESOLVERS and "rules" in RESOLVERS and set(components.ENGINES) == {"spacy", "booknlp"}
