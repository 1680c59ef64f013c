"""Word vectors with characters as words: gensim word2vec over the mention-replaced text of every book.

Each character mention becomes one token scoped by its book (`CHAR_3@09333c7d604b`: character 3 of one book is not
character 3 of another), so every character gets a vector of its own. Words are lowercased.
Artifacts under WS/embeddings/: corpus/<id>.txt (one sentence per line), word2vec.model, vocab.json (token -> row of
the vectors, the vocabulary the memory network uses), config.json and state.json (the vectors' lineage and books),
all written and read through whoqa.core.store.

The vectors grow: the first `prepare` trains them, later books are folded in (new rows appended, old rows locked), so
a workspace can take new books after models were trained on it.
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from whoqa.core import store
from whoqa.core.book import Book
from whoqa.core.registry import positive, require
from whoqa.core.seed import SEED
from whoqa.core.store import CHAR_PREFIX, read_state, save_vectors, scoped
from whoqa.core.workspace import Workspace

log = logging.getLogger(__name__)


@dataclass
class EmbeddingConfig:
    vector_size: int = 100  # Angelidis et al.: 100-d word and character embeddings
    window: int = 5
    min_count: int = 5  # for words; every character token is kept whatever its count
    epochs: int = 5
    sg: int = 0  # CBOW (gensim's default); 1 for skip-gram
    workers: int = 1  # seeded and bit-for-bit repeatable; 2 is ~1.5x faster but threads race (vectors differ by up to ~2)
    seed: int = SEED

    def __post_init__(self):
        positive(self, "vector_size", "window", "min_count", "epochs", "workers")
        require(self, "sg", self.sg in (0, 1), "0 (CBOW) or 1 (skip-gram)")


def corpus_lines(book: Book) -> list[str]:
    return [" ".join(scoped(t, book.id) for t in book.replaced_sentence(s)) for s in range(len(book.sentences))]


def write_corpus(book: Book, folder: Path) -> int:
    lines = corpus_lines(book)
    store.write_corpus(folder, book.id, lines)
    return len(lines)


def _trim(word, count, min_count):
    from gensim.utils import RULE_DEFAULT, RULE_KEEP
    return RULE_KEEP if word.startswith(CHAR_PREFIX) else RULE_DEFAULT


def train(workspace: Path, cfg: EmbeddingConfig | None = None, book_ids: list[str] | None = None) -> dict:
    """Train word2vec from scratch on WS/embeddings/corpus/*.txt (all of them, or book_ids): a new lineage, so
    every memory network trained on the old vectors is stale (`stale_models` names them)."""
    from gensim.models import Word2Vec
    cfg = cfg or EmbeddingConfig()
    ws = Workspace(workspace)
    out = ws.embeddings
    files = sorted(ws.corpus.glob("*.txt"))
    if book_ids is not None:
        files = [f for f in files if f.stem in set(book_ids)]
    if not files:
        raise FileNotFoundError(f"no corpus under {ws.corpus}: run `whoqa prepare --workspace {workspace}` first")
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
    save_vectors(model, workspace, state)
    store.write_vectors_config(workspace, asdict(cfg), stats)
    return {**stats, "lineage": state["lineage"], "mode": "trained"}


def fold_in(workspace: Path, corpus: dict[str, Path]) -> dict:
    """Add books to existing vectors without moving them: the books' new tokens (their characters, unseen words that
    pass min_count in them) are appended as new rows and trained on the books' text with every existing row locked
    (gensim's per-row lock factor 0), so a model trained on the old rows stays valid; it extends its embedding matrix
    with the new rows when it loads. corpus: book id -> its corpus file. One worker and a fixed seed: repeatable."""
    from gensim.models.word2vec import LineSentence
    out = Workspace(workspace).embeddings
    state = read_state(workspace)
    if state is None:
        raise FileNotFoundError(f"no word vectors in {out}: run `whoqa prepare --workspace {workspace}` first")
    new = {b: p for b, p in sorted(corpus.items()) if b not in set(state["books"])}
    if not new:
        return {"books": 0, "new_rows": 0, "rows": state["rows"], "lineage": state["lineage"], "mode": "current"}
    t0 = time.perf_counter()
    model = store.load_word2vec(workspace)
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
    save_vectors(model, workspace, state)
    return {"books": len(new), "new_rows": len(model.wv) - old, "rows": len(model.wv), "lineage": state["lineage"],
            "mode": "folded in", "seconds": round(time.perf_counter() - t0, 2)}


def update(workspace: Path, rebuild: bool = False, cfg: EmbeddingConfig | None = None) -> dict:
    """Vectors for every book with a corpus in the workspace: trained the first time (or with rebuild), else the
    books not yet in them folded in."""
    corpus = {p.stem: p for p in sorted((Workspace(workspace).corpus).glob("*.txt"))}
    if rebuild or read_state(workspace) is None:
        return train(workspace, cfg)
    return fold_in(workspace, corpus)
