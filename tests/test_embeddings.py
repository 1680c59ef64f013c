import json

import numpy as np
import pytest

from data_prep.embeddings import EmbeddingConfig, corpus_lines, train, write_corpus
from whoqa.core.store import load_vectors, scoped
from whoqa.core.book import Book, write_book_files


def test_scoped_tokens():
    assert scoped("CHAR_3", "09333c7d604bd412e6aef5d3e56b046ed301c5e5") == "CHAR_3@09333c7d604b"
    assert scoped("Holmes", "x") == "holmes"


def _book(tmp_path, book_id, words, ents, chars):
    rows, pos = [], 0
    for i, w in enumerate(words):
        rows.append([0, 0, i, i, w, w, pos, pos + len(w), "X", "NN", "dep", i, "O"])
        pos += len(w) + 1
    write_book_files(tmp_path / book_id, book_id, rows, ents, {"characters": [{"id": c, "count": 2} for c in chars]})
    return Book.load(tmp_path / book_id, book_id)


def test_characters_are_book_scoped_words(tmp_path):
    ws = tmp_path / "ws"
    a = _book(tmp_path, "a" * 40, ["Anna", "sold", "her", "house"],
              [[1, 0, 0, "PROP", "PER", "Anna"], [1, 2, 2, "PRON", "PER", "her"]], [1])
    b = _book(tmp_path, "b" * 40, ["Bob", "sold", "a", "house"], [[1, 0, 0, "PROP", "PER", "Bob"]], [1])
    assert corpus_lines(a) == [f"CHAR_1@{'a' * 12} sold CHAR_1@{'a' * 12} house"]
    for book in (a, b):
        write_corpus(book, ws / "embeddings" / "corpus")
    # repeat the corpus so min_count keeps the words; both books' CHAR_1 must be distinct words
    for f in (ws / "embeddings" / "corpus").glob("*.txt"):
        f.write_text(f.read_text() * 10)
    cfg = EmbeddingConfig(vector_size=8, min_count=5, epochs=2, workers=1)
    stats = train(ws, cfg)
    vocab = json.loads((ws / "embeddings" / "vocab.json").read_text())
    assert f"CHAR_1@{'a' * 12}" in vocab and f"CHAR_1@{'b' * 12}" in vocab
    assert stats["characters"] == 2 and stats["books"] == 2
    wv = load_vectors(ws)
    assert wv.vector_size == 8 and not np.allclose(wv[f"CHAR_1@{'a' * 12}"], wv[f"CHAR_1@{'b' * 12}"])
    saved = json.loads((ws / "embeddings" / "config.json").read_text())
    assert saved["config"]["vector_size"] == 8


def test_rare_characters_are_kept_rare_words_are_not(tmp_path):
    ws = tmp_path / "ws"
    corpus = ws / "embeddings" / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "x.txt").write_text("the cat sat\n" * 20 + "CHAR_9@xxxxxxxxxxxx hapax\n")
    train(ws, EmbeddingConfig(vector_size=4, min_count=5, epochs=1, workers=1))
    vocab = json.loads((ws / "embeddings" / "vocab.json").read_text())
    assert "CHAR_9@xxxxxxxxxxxx" in vocab and "hapax" not in vocab


def test_missing_corpus_says_what_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="whoqa prepare"):
        train(tmp_path)


def test_seeded_word2vec_is_repeatable(tmp_path):
    vectors = []
    for k in range(2):
        corpus = tmp_path / str(k) / "embeddings" / "corpus"
        corpus.mkdir(parents=True)
        (corpus / "x.txt").write_text("the cat sat on the mat near CHAR_1@xxxxxxxxxxxx\n" * 200
                                      + "a dog ran past the cat and CHAR_2@xxxxxxxxxxxx\n" * 200)
        train(tmp_path / str(k), EmbeddingConfig(vector_size=16, min_count=1, epochs=3))  # default workers
        vectors.append(load_vectors(tmp_path / str(k)).vectors.copy())
    assert np.array_equal(vectors[0], vectors[1])
