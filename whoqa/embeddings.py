"""Word vectors with characters as words: gensim word2vec over the mention-replaced text of every book.

Each character mention becomes one token scoped by its book (`CHAR_3@09333c7d604b`: character 3 of one book is not
character 3 of another), so every character gets a vector of its own. Words are lowercased.
Artifacts under WS/embeddings/: corpus/<id>.txt (one sentence per line), word2vec.model, vocab.json (token -> row of
the vectors, the vocabulary the memory network uses) and config.json.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from whoqa.book import Book, atomic_write

log = logging.getLogger(__name__)
CHAR_PREFIX = "CHAR_"


@dataclass
class EmbeddingConfig:
    vector_size: int = 100  # Angelidis et al.: 100-d word and character embeddings
    window: int = 5
    min_count: int = 5  # for words; every character token is kept whatever its count
    epochs: int = 5
    sg: int = 0  # CBOW (gensim's default); 1 for skip-gram
    workers: int = 2  # >1 is faster but not bit-for-bit repeatable; use 1 for exact reproduction
    seed: int = 13


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


def train(workspace: Path, cfg: EmbeddingConfig | None = None, book_ids: list[str] | None = None) -> dict:
    """Train word2vec on WS/embeddings/corpus/*.txt (all of them, or book_ids) and save model and vocabulary."""
    from gensim.models import Word2Vec
    from gensim.utils import RULE_KEEP, RULE_DEFAULT
    cfg = cfg or EmbeddingConfig()
    out = Path(workspace) / "embeddings"
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
                     trim_rule=lambda w, c, m: RULE_KEEP if w.startswith(CHAR_PREFIX) else RULE_DEFAULT)
    seconds = time.perf_counter() - t0
    model.save(str(out / "word2vec.model"))
    vocab = {w: i for i, w in enumerate(model.wv.index_to_key)}
    atomic_write(out / "vocab.json", json.dumps(vocab))
    stats = {"books": len(files), "tokens": int(model.corpus_total_words), "vocab": len(vocab),
             "characters": sum(1 for w in vocab if w.startswith(CHAR_PREFIX)), "train_seconds": round(seconds, 1)}
    atomic_write(out / "config.json", json.dumps({"config": asdict(cfg), "stats": stats}, indent=1))
    joined.unlink()
    return stats


def load(workspace: Path):
    """The trained KeyedVectors."""
    from gensim.models import Word2Vec
    path = Path(workspace) / "embeddings" / "word2vec.model"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `whoqa prepare --workspace {workspace}` first")
    return Word2Vec.load(str(path)).wv
