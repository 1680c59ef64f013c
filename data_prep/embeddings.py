"""Word vectors with characters as words: gensim word2vec over the mention-replaced text of every book.

Each character mention becomes one token scoped by its book (`CHAR_3@09333c7d604b`: character 3 of one book is not
character 3 of another), so every character gets a vector of its own. Words are lowercased.
Artifacts under WS/embeddings/: corpus/<id>.txt (one sentence per line), word2vec.model, vocab.json (token -> row of
the vectors, the vocabulary the memory network uses), config.json and state.json (the vectors' lineage and books).

The vectors grow: the first `prepare` trains them, later books are folded in (new rows appended, old rows locked), so
a workspace can take new books after models were trained on it.
"""
from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from whoqa.core.artifacts import read_json
from whoqa.core.book import Book
from whoqa.core.files import atomic_write
from whoqa.core.workspace import Workspace
from whoqa.core.seed import SEED
import hashlib
from whoqa.core.artifacts import forget_checksum, load_binary, record_checksum

log = logging.getLogger(__name__)
CHAR_PREFIX = "CHAR_"


@dataclass
class EmbeddingConfig:
    vector_size: int = 100  # Angelidis et al.: 100-d word and character embeddings
    window: int = 5
    min_count: int = 5  # for words; every character token is kept whatever its count
    epochs: int = 5
    sg: int = 0  # CBOW (gensim's default); 1 for skip-gram
    workers: int = 1  # seeded and bit-for-bit repeatable; 2 is ~1.5x faster but threads race (vectors differ by up to ~2)
    seed: int = SEED


def scoped(token: str, book_id: str) -> str:
    """A book-local CHAR_3 -> the corpus-wide CHAR_3@<book id prefix>; other tokens are lowercased."""
    if token.startswith(CHAR_PREFIX):
        return f"{token}@{book_id[:12]}"
    return token.lower()


def corpus_lines(book: Book) -> list[str]:
    return [" ".join(scoped(t, book.id) for t in book.replaced_sentence(s)) for s in range(len(book.sentences))]


def write_corpus(book: Book, folder: Path) -> int:
    lines = corpus_lines(book)
    atomic_write(Path(folder) / f"{book.id}.txt", "\n".join(lines) + "\n")
    return len(lines)


def _trim(word, count, min_count):
    from gensim.utils import RULE_DEFAULT, RULE_KEEP
    return RULE_KEEP if word.startswith(CHAR_PREFIX) else RULE_DEFAULT


def read_state(workspace: Path) -> dict | None:
    """WS/embeddings/state.json: {"lineage", "rows", "books", "history"}; None before the first training.
    lineage names one from-scratch training: rows made by it (and the rows folded in since) keep their place."""
    path = Workspace(workspace).embeddings_state
    repair = (f"the word vectors' record is lost: run `whoqa prepare --workspace {workspace} --rebuild-vectors`, then "
              f"retrain the models")
    if path.is_file():
        return read_json(path, repair, dict)
    if (Workspace(workspace).word2vec).is_file():  # vectors made before state.json existed
        vocab = (Workspace(workspace).vocab).read_bytes()
        corpus = sorted(p.stem for p in (Workspace(workspace).corpus).glob("*.txt"))
        rows = len(read_json(Workspace(workspace).vocab, repair, dict))
        return {"lineage": "legacy-" + hashlib.sha256(vocab).hexdigest()[:12], "rows": rows,
                "books": corpus, "history": []}
    return None


def _save(model, out: Path, state: dict) -> None:
    try:
        model.save(str(out / "word2vec.tmp"))
    except BaseException:  # a full disk or an interruption: no half-written vectors are left behind
        for tmp in [out / "word2vec.tmp", *out.glob("word2vec.tmp.*")]:
            tmp.unlink(missing_ok=True)
        raise
    forget_checksum(out / "word2vec.model")
    os.replace(out / "word2vec.tmp", out / "word2vec.model")
    arrays = []
    for extra in out.glob("word2vec.tmp.*"):  # gensim writes big arrays beside the file
        arrays.append(out / extra.name.replace("word2vec.tmp", "word2vec.model"))
        os.replace(extra, arrays[-1])
    record_checksum(out / "word2vec.model", *sorted(arrays))  # word2vec.model.sha256: `whoqa check` compares
    state["rows"] = len(model.wv)
    atomic_write(out / "vocab.json", json.dumps({w: i for i, w in enumerate(model.wv.index_to_key)}))
    atomic_write(out / "state.json", json.dumps(state, indent=1))


def train(workspace: Path, cfg: EmbeddingConfig | None = None, book_ids: list[str] | None = None) -> dict:
    """Train word2vec from scratch on WS/embeddings/corpus/*.txt (all of them, or book_ids): a new lineage, so
    every memory network trained on the old vectors is stale (`stale_models` names them)."""
    from gensim.models import Word2Vec
    cfg = cfg or EmbeddingConfig()
    out = Workspace(workspace).embeddings
    files = sorted((out / "corpus").glob("*.txt"))
    if book_ids is not None:
        files = [f for f in files if f.stem in set(book_ids)]
    if not files:
        raise FileNotFoundError(f"no corpus under {out / 'corpus'}: run `whoqa prepare --workspace {workspace}` first")
    joined = out / "corpus.all.txt"
    with open(joined, "w", encoding="utf-8") as w:
        for f in files:
            w.write(f.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    model = Word2Vec(corpus_file=str(joined), vector_size=cfg.vector_size, window=cfg.window,
                     min_count=cfg.min_count, epochs=cfg.epochs, sg=cfg.sg, workers=cfg.workers, seed=cfg.seed,
                     trim_rule=_trim)
    seconds = time.perf_counter() - t0
    joined.unlink()
    stats = {"books": len(files), "tokens": int(model.corpus_total_words), "vocab": len(model.wv),
             "characters": sum(1 for w in model.wv.index_to_key if w.startswith(CHAR_PREFIX)),
             "train_seconds": round(seconds, 1)}
    state = {"lineage": uuid.uuid4().hex[:12], "books": [f.stem for f in files],
             "history": [{"trained": len(files), "rows": len(model.wv)}]}
    _save(model, out, state)
    atomic_write(out / "config.json", json.dumps({"config": asdict(cfg), "stats": stats}, indent=1))
    return {**stats, "lineage": state["lineage"], "mode": "trained"}


def fold_in(workspace: Path, corpus: dict[str, Path]) -> dict:
    """Add books to existing vectors without moving them: the books' new tokens (their characters, unseen words that
    pass min_count in them) are appended as new rows and trained on the books' text with every existing row locked
    (gensim's per-row lock factor 0), so a model trained on the old rows stays valid; it extends its embedding matrix
    with the new rows when it loads. corpus: book id -> its corpus file. One worker and a fixed seed: repeatable."""
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence
    out = Workspace(workspace).embeddings
    state = read_state(workspace)
    if state is None:
        raise FileNotFoundError(f"no word vectors in {out}: run `whoqa prepare --workspace {workspace}` first")
    new = {b: p for b, p in sorted(corpus.items()) if b not in set(state["books"])}
    if not new:
        return {"books": 0, "new_rows": 0, "rows": state["rows"], "lineage": state["lineage"], "mode": "current"}
    t0 = time.perf_counter()
    model = load_binary(out / "word2vec.model", lambda p: Word2Vec.load(str(p)), rebuild_vectors(workspace))
    sentences = [line for p in new.values() for line in LineSentence(str(p))]
    old = len(model.wv)
    model.build_vocab(sentences, update=True, trim_rule=_trim)
    lockf = np.zeros(len(model.wv), dtype=np.float32)  # (rows,) 0 = frozen, 1 = trained
    lockf[old:] = 1.0
    model.wv.vectors_lockf = lockf
    model.workers = 1
    model.random = np.random.RandomState(model.seed)
    before = model.wv.vectors[:old].copy()  # (old, d)
    model.min_alpha_yet_reached = model.alpha  # a fold-in starts its own learning-rate schedule (no warning)
    if len(model.wv) > old:
        model.train(sentences, total_examples=len(sentences), epochs=model.epochs)
    assert np.array_equal(model.wv.vectors[:old], before), "fold-in moved an existing word vector"
    model.wv.vectors_lockf = np.ones(1, dtype=np.float32)
    state["books"] += list(new)
    state["history"].append({"folded_in": list(new), "new_rows": len(model.wv) - old, "rows": len(model.wv)})
    _save(model, out, state)
    return {"books": len(new), "new_rows": len(model.wv) - old, "rows": len(model.wv), "lineage": state["lineage"],
            "mode": "folded in", "seconds": round(time.perf_counter() - t0, 2)}


def update(workspace: Path, rebuild: bool = False, cfg: EmbeddingConfig | None = None) -> dict:
    """Vectors for every book with a corpus in the workspace: trained the first time (or with rebuild), else the
    books not yet in them folded in."""
    corpus = {p.stem: p for p in sorted((Workspace(workspace).corpus).glob("*.txt"))}
    if rebuild or read_state(workspace) is None:
        return train(workspace, cfg)
    return fold_in(workspace, corpus)


def load(workspace: Path):
    """The trained KeyedVectors."""
    from gensim.models import Word2Vec
    path = Workspace(workspace).word2vec
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `whoqa prepare --workspace {workspace}` first")
    # truncated, empty or otherwise unreadable (pickle, numpy arrays beside it): DamagedArtifact naming it
    return load_binary(path, lambda p: Word2Vec.load(str(p)).wv, rebuild_vectors(workspace))


def rebuild_vectors(workspace: Path) -> str:
    return (f"rebuild the vectors with `whoqa prepare --workspace {workspace} --rebuild-vectors` (with the --data "
            f"`whoqa check` names), then retrain the models")
