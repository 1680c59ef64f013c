import json
import os

import pytest

from data_prep.prepare import PrepareConfig, prepare
from tests.conftest import SHORT_BOOKS, build_mini_data
from whoqa.core.book import Book


def test_prepare_parallel_resumes_and_reports_bad_books(mini_data, tmp_path):
    ws = tmp_path / "ws"
    cfg = PrepareConfig(str(mini_data), str(ws), jobs=2)
    rep = prepare(cfg, progress=False)
    assert sorted(rep.done) == sorted(SHORT_BOOKS + ["09333c7d604bd412e6aef5d3e56b046ed301c5e5"])
    assert list(rep.failed) == ["e" * 40] and "empty" in rep.failed["e" * 40]
    for b in rep.done:
        book = Book.load(ws / "books" / b, b)
        assert book.tokens and book.characters
    saved = json.loads((ws / "prepare_report.json").read_text())
    assert saved["config"]["jobs"] == 2 and len(saved["report"]["done"]) == 3

    # an interrupted run: one book lost its last file; only that one (and the bad one) is redone
    (ws / "books" / SHORT_BOOKS[0] / f"{SHORT_BOOKS[0]}.book").unlink()
    rep2 = prepare(PrepareConfig(str(mini_data), str(ws), jobs=1), progress=False)
    assert rep2.done == [SHORT_BOOKS[0]] and len(rep2.skipped) == 2
    assert not list((ws / "books").rglob("*.tmp"))


def test_prepare_named_books_only(mini_data, tmp_path):
    rep = prepare(PrepareConfig(str(mini_data), str(tmp_path / "ws"), books=[SHORT_BOOKS[1]]), progress=False)
    assert rep.done == [SHORT_BOOKS[1]] and not rep.failed


def test_unknown_book_is_a_clear_error(mini_data, tmp_path):
    import pytest
    with pytest.raises(ValueError, match="not found"):
        prepare(PrepareConfig(str(mini_data), str(tmp_path / "ws"), books=["nope"]), progress=False)


def test_cli_prepare(mini_data, tmp_path):
    from typer.testing import CliRunner
    from cli import app
    res = CliRunner().invoke(app, ["prepare", "--data", str(mini_data), "--workspace", str(tmp_path / "ws"),
                                   "--book", SHORT_BOOKS[0], "--jobs", "1"])
    assert res.exit_code == 0, res.output
    assert "prepared 1 book(s)" in res.output
    res = CliRunner().invoke(app, ["prepare", "--data", str(tmp_path / "missing"), "--workspace", str(tmp_path / "w")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_bad_book_texts_fail_with_a_reason_and_c1_controls_never_reach_tokens(mini_data, tmp_path):
    import numpy as np
    from whoqa.core.book import read_tokens
    books = mini_data / "books"
    (books / ("b" * 40 + ".txt")).write_bytes(np.random.default_rng(1).integers(0, 256, 40000, np.uint8).tobytes())
    (books / ("c" * 40 + ".txt")).write_bytes(b"Anna walked home. " * 40 + b"\x81" + b" Anna slept.\n")
    (books / ("d" * 40 + ".txt")).write_text("Anna walked home.\u0085 Anna saw Tom.\u0091 Tom waved.\n"
                                            + "Anna walked home. Anna saw Tom. Tom waved.\n" * 20)
    rep = prepare(PrepareConfig(str(mini_data), str(tmp_path / "ws"), books=["b" * 40, "c" * 40, "d" * 40],
                                who_set=False, artificial=False, embeddings=False), progress=False)
    assert "binary" in rep.failed["b" * 40] and "neither UTF-8" in rep.failed["c" * 40]
    assert rep.done == ["d" * 40]
    words = [t.word for t in read_tokens(tmp_path / "ws" / "books" / ("d" * 40) / ("d" * 40 + ".tokens"))]
    assert words and not any(0x80 <= ord(ch) < 0xA0 for w in words for ch in w)


def test_data_folder_problems_are_one_line_errors(tmp_path, mini_data):
    from typer.testing import CliRunner
    from cli import app
    (tmp_path / "nonqa" / "books").mkdir(parents=True)
    (tmp_path / "nonqa" / "books" / "x.txt").write_text("Anna walked home.\n")
    nobooks = tmp_path / "nobooks"
    (nobooks / "narrativeqa").mkdir(parents=True)
    (nobooks / "narrativeqa" / "documents.csv").write_text((mini_data / "narrativeqa" / "documents.csv").read_text())
    (tmp_path / "afile").write_text("x")
    for data, ws, why in ((tmp_path / "nonqa", tmp_path / "w1", "documents.csv not found"),
                          (nobooks, tmp_path / "w2", "no books in"),
                          (mini_data, tmp_path / "afile", "is a file")):
        res = CliRunner().invoke(app, ["prepare", "--data", str(data), "--workspace", str(ws), "--jobs", "1"])
        assert res.exit_code == 2 and why in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_a_book_whose_text_changed_is_redone(mini_data, tmp_path):
    ws = tmp_path / "ws"
    cfg = PrepareConfig(str(mini_data), str(ws), books=[SHORT_BOOKS[1]], who_set=False, embeddings=False)
    rep = prepare(cfg, progress=False)
    assert rep.per_book[SHORT_BOOKS[1]]["encoding"] == "utf-8"
    assert prepare(cfg, progress=False).skipped == [SHORT_BOOKS[1]]
    path = mini_data / "books" / f"{SHORT_BOOKS[1]}.txt"
    path.write_text(path.read_text().replace("Jeremy", "Jeremiah"))
    rep = prepare(cfg, progress=False)
    assert rep.redone_text_changed == [SHORT_BOOKS[1]] and rep.done == [SHORT_BOOKS[1]]
    book = Book.load(ws / "books" / SHORT_BOOKS[1], SHORT_BOOKS[1])
    assert any("Jeremiah" in c.name for c in book.characters.values())
    assert (ws / "artificial" / f"{SHORT_BOOKS[1]}.jsonl.gz").is_file()  # derived again from the new text


def test_coref_weights_change_the_pronouns_and_a_book_made_otherwise_is_redone(mini_data, tmp_path):
    """`prepare --coref-weights` resolves pronouns with `whoqa train-coref`'s weights, records them with the book, and
    a book prepared with other weights (or the rules) is redone rather than reused."""
    from dataclasses import asdict

    from data_prep.coref import Weights
    from whoqa.core.text import DataError
    from whoqa.core.store import SOURCE_FILE

    book_id = SHORT_BOOKS[1]
    ws = tmp_path / "ws"
    rules = PrepareConfig(str(mini_data), str(ws), books=[book_id], who_set=False, artificial=False, embeddings=False)
    prepare(rules, progress=False)
    entities = (ws / "books" / book_id / f"{book_id}.entities").read_text()
    # weights that prefer the farthest candidate and ignore gender: other pronouns go to other characters
    perverse = {**asdict(Weights()), "distance": -3.0, "gender": 0.0, "salience": -1.0}
    weights = tmp_path / "coref_weights.json"
    weights.write_text(json.dumps({"weights": perverse}))
    learned = PrepareConfig(**{**rules.__dict__, "coref_weights": str(weights)})
    rep = prepare(learned, progress=False)
    assert rep.redone_engine_changed == [book_id] and rep.done == [book_id]
    made_by = json.loads((ws / "books" / book_id / SOURCE_FILE).read_text())["made_by"]
    assert made_by["engine"] == "spacy" and len(made_by["coref_weights"]) == 40
    assert (ws / "books" / book_id / f"{book_id}.entities").read_text() != entities
    assert prepare(learned, progress=False).skipped == [book_id]  # the same weights: reused
    rep = prepare(rules, progress=False)  # back to the rules: redone, and the rules' output again
    assert rep.redone_engine_changed == [book_id]
    assert (ws / "books" / book_id / f"{book_id}.entities").read_text() == entities
    missing = PrepareConfig(**{**rules.__dict__, "coref_weights": str(tmp_path / "nope.json")})
    with pytest.raises(DataError, match="nope.json not found"):
        prepare(missing, progress=False)


def test_the_python_api_makes_books_with_fixed_string_hashing(monkeypatch, tmp_path, shared_data):
    """A caller whose Python hashes strings at random gets its books made in children that hash as the command does
    (the command itself re-executes with PYTHONHASHSEED fixed)."""
    import multiprocessing as mp

    import data_prep.prepare as prep
    from whoqa.core.seed import HASH_SEED, fixed_hash_seed_env
    with fixed_hash_seed_env():
        ctx = mp.get_context("spawn")
        with ctx.Pool(1) as pool:
            assert pool.apply(_hash_randomization) == 0 and os.environ["PYTHONHASHSEED"] == HASH_SEED
    used = []
    real = prep.pooled

    def spy(*a, **k):
        used.append(os.environ.get("PYTHONHASHSEED"))
        yield from real(*a, **k)
    monkeypatch.setattr(prep, "hash_seed_fixed", lambda: False)
    monkeypatch.setattr(prep, "pooled", spy)
    data = build_mini_data(tmp_path / "data", shared_data)
    rep = prep.prepare(prep.PrepareConfig(data=str(data), workspace=str(tmp_path / "ws"), books=[SHORT_BOOKS[0]],
                                          jobs=1, unlabeled=False, artificial=False, embeddings=False), progress=False)
    assert used == [HASH_SEED] and rep.done == [SHORT_BOOKS[0]]


def _hash_randomization():
    import sys
    return sys.flags.hash_randomization


def test_forgetting_a_book_removes_what_every_stage_derived_from_it_and_nothing_else(tmp_path):
    from whoqa.core.store import forget_derived
    from whoqa.core.workspace import Workspace
    ws = Workspace(tmp_path / "ws")
    made = {}
    for book in ("a", "b"):
        made[book] = [ws.artificial_questions(book), ws.corpus_file(book), ws.contexts_file("bm25f", book),
                      ws.contexts_file("bert", book), ws.memory_arrays("lin1", book), ws.book_index(book) / "segments_1",
                      ws.book(book) / f"{book}.tokens"]
        for p in made[book]:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("x")
    report = ws.contexts_report("bm25f")
    report.write_text("{}")
    ws.texts.write_text('{"a": {"path": "a.txt"}, "b": {"path": "b.txt"}}')
    forget_derived(ws, "a")
    assert not any(p.exists() for p in made["a"]) and not ws.book_index("a").exists() and not ws.book("a").exists()
    assert all(p.exists() for p in made["b"]) and report.exists()
    assert list(json.loads(ws.texts.read_text())) == ["b"]  # (listed there means taken in whole: store.intake_gaps)
