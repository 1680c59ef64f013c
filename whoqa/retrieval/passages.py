"""Passages for a question that is not about a character: retrieval for what the question asks, not its words.

The stored BM25F contexts (whoqa.retrieval.bm25f) query with every word of the question, so "Where does Tom hide?"
ranks sentences by "where" and "does" as much as by "hide": the passages an LLM then reads match the question's
function words. Here the query keeps only the question's content words (question words, auxiliaries, pronouns and
other stopwords weigh nothing) and the characters it names as their character ids, so that sentences mentioning them
through a resolved pronoun count too. A dense retriever (the bundled MiniLM, mean-pooled sentence vectors) can be
fused with it by reciprocal rank fusion. Which of these serves is `PassageConfig`'s default, chosen by the recall of
answer-bearing windows on the shared books (docs/reader.md).

The Who path and the stored contexts keep `question_windows`: models were trained and measured on those.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from whoqa.core.book import Book
from whoqa.core.files import atomic_write
from whoqa.core.query import Query
from whoqa.core.registry import positive
from whoqa.retrieval.bm25f import RetrievalConfig, Window, question_windows, windows

log = logging.getLogger(__name__)

QUERIES = ("question", "content")  # every word of the question (the stored contexts' query) | its content words
FUSIONS = ("bm25f", "rrf", "dense", "pool")  # BM25F alone | BM25F and MiniLM by reciprocal rank fusion | MiniLM
#   alone | "pool": rrf with MiniLM ranking only BM25F's first `pool_sentences` hits, encoded when a question needs
#   them, so no book is encoded whole (a first question about a new book waits seconds, not a minute)
WHOLE_BOOK = ("rrf", "dense")  # the fusions that read every sentence's vector


@dataclass
class PassageConfig:
    query: str = "content"  # question | content (QUERIES)
    fusion: str = "pool"  # bm25f | rrf | dense | pool (FUSIONS): rrf had the best recall@5 of an answer-bearing
    #                      window on 246 non-Who questions of 10 shared books (docs/reader.md);
    #                      pool keeps its answers (the 10 unseen books' 211 other questions: ROUGE-L 22.57 against
    #                      22.15, "not found" 64 against 68: docs/reader.md) without
    #                      encoding the whole book, so a first other question waits seconds, not a minute
    rrf_k: int = 60  # reciprocal rank fusion's constant (Cormack et al. 2009): score = sum 1 / (k + rank)
    dense_pool: int = 1000  # sentences the dense ranking contributes
    pool_sentences: int = 300  # "pool": BM25F's hits MiniLM ranks (docs/reader.md: 300
    #                            kept recall@5 within 2 points of the whole book's vectors, 205 sentences encoded)
    window: int = RetrievalConfig.window  # sentences a passage holds: the hit and window // 2 on each side (the
    #                  stored contexts'); single sentences found more answers' words but the 1.5B answered worse from
    #                  them (docs/reader.md)

    def __post_init__(self):
        self.check()
        positive(self, "rrf_k", "dense_pool", "pool_sentences", "window")

    @property
    def whole_book(self) -> bool:
        """Whether the fusion reads the whole book's sentence vectors (encoded once per book)."""
        return self.fusion in WHOLE_BOOK

    def check(self) -> None:
        if self.query not in QUERIES or self.fusion not in FUSIONS:
            raise ValueError(f"unknown passage retrieval {self.query!r}/{self.fusion!r}: use query in {QUERIES}, "
                             f"fusion in {FUSIONS}")


def sentence_text(book: Book, sid: int) -> str:
    a, b = book.sentences[sid]
    return " ".join(t.word for t in book.tokens[a:b])


@lru_cache(maxsize=2)
def _encoder(path: str, device: str | None):
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging
    from whoqa.core.device import as_device
    hf_logging.disable_progress_bar()  # (it may load in a background thread, beside an answer being shown)
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval().to(as_device(device))


def encode(texts: list[str], device: str | None = None, batch_size: int = 64):
    """Mean-pooled, normalised MiniLM vectors of texts (float32 numpy, (len(texts), 384)); the model loads once.
    Batches hold texts of similar length (sorted by length, the order restored after), so little is padding: a book's
    sentences run from 3 words to 128 tokens."""
    import numpy as np
    import torch
    from whoqa.core.minilm import bundled_minilm
    tok, model = _encoder(bundled_minilm("use PassageConfig.fusion 'bm25f'"), device)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            enc = tok([texts[j] for j in order[i:i + batch_size]], padding=True, truncation=True, max_length=128,
                      return_tensors="pt").to(model.device)
            hidden = model(**enc).last_hidden_state  # (batch, seq, hidden)
            mask = enc["attention_mask"].unsqueeze(-1).float()  # (batch, seq, 1)
            vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (batch, hidden)
            out.append(torch.nn.functional.normalize(vec, dim=-1).cpu().numpy())
    if not out:
        return np.zeros((0, model.config.hidden_size), np.float32)
    vectors = np.empty((len(texts), out[0].shape[1]), np.float32)
    vectors[order] = np.concatenate(out)
    return vectors


class DenseIndex:
    """A book's sentence vectors, encoded once and kept as a .npy beside its BM25F index (a cache derived from the
    book: rebuilt when missing, damaged or shorter than the book; a book cut by --upto reads only its own prefix)."""

    def __init__(self, book: Book, path: Path, device: str | None = None):
        import numpy as np
        self.device = device
        n = len(book.sentences)
        vectors = None
        if Path(path).is_file():
            try:
                vectors = np.load(path)
            except (OSError, ValueError):
                vectors = None
        if vectors is None or vectors.ndim != 2 or vectors.shape[0] < n:  # (a book cut by --upto reads a prefix)
            vectors = encode([sentence_text(book, s) for s in range(n)], device)
            import io
            buf = io.BytesIO()
            np.save(buf, vectors)
            atomic_write(Path(path), buf.getvalue())
        self.vectors = vectors[:n]  # (sentences, 384): none after a cut (--upto)
        self._asked: dict[str, object] = {}  # text -> its vector (a question is searched by several configs)

    def search(self, text: str, k: int) -> list[tuple[int, float]]:
        """(sentence id, cosine) of the k sentences closest to text, best first."""
        import numpy as np
        if not len(self.vectors) or not text.strip():
            return []
        if text not in self._asked:
            self._asked = {text: encode([text], self.device)[0]}
        scores = self.vectors @ self._asked[text]  # (sentences,)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(int(s), float(scores[s])) for s in top]


class PoolVectors:
    """A book's sentence vectors made only as questions need them ("pool" fusion), kept for the book's later
    questions. (A vector agrees to about 1e-7 whichever batch encoded it.)"""

    def __init__(self, book: Book, device: str | None = None):
        self.book, self.device = book, device
        self.made: dict[int, object] = {}  # sentence id -> its vector (384,)

    def rank(self, text: str, sentences: list[int]) -> list[tuple[int, float]]:
        """(sentence id, cosine) of these sentences to text, best first."""
        import numpy as np
        if not sentences or not text.strip():
            return []
        new = [s for s in dict.fromkeys(sentences) if s not in self.made]
        vectors = encode([text] + [sentence_text(self.book, s) for s in new], self.device)  # (1 + new, 384)
        self.made.update(zip(new, vectors[1:]))
        scores = np.stack([self.made[s] for s in sentences]) @ vectors[0]  # (sentences,)
        return [(sentences[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")]


def rrf(*rankings: list[tuple[int, float]], k: int = 60) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of sentence rankings: each sentence scores sum 1 / (k + rank) (rank from 1); ties keep
    the first ranking's order."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, (sid, _) in enumerate(ranking, start=1):
            score[sid] = score.get(sid, 0.0) + 1.0 / (k + r)
    order = {sid: i for i, sid in enumerate(dict.fromkeys(s for ranking in rankings for s, _ in ranking))}
    return sorted(score.items(), key=lambda x: (-x[1], order[x[0]]))


def passage_windows(book: Book, index, query: Query, cfg: PassageConfig | None = None,
                    dense: DenseIndex | PoolVectors | None = None, rcfg: RetrievalConfig | None = None) -> list[Window]:
    """A non-Who question's windows ([[first, last, score], ...], rank order, as `question_windows`) in a book and its
    BM25F index; `dense`: the book's DenseIndex where cfg.fusion needs one (PoolVectors for "pool")."""
    cfg, rcfg = cfg or PassageConfig(), rcfg or RetrievalConfig()
    cfg.check()  # (a field set after it was made)
    if cfg.fusion == "bm25f" and cfg.query == "question":
        return question_windows(index, query, len(book.sentences), replace(rcfg, window=cfg.window))
    if cfg.fusion != "bm25f" and dense is None:
        raise ValueError(f"passage fusion {cfg.fusion!r} needs the book's DenseIndex")
    words = query.content if cfg.query == "content" else query.words
    ranked = index.search(words, query.characters, rcfg.pool)
    if not ranked and cfg.query == "content":  # only function words (and no character): the whole question
        ranked = index.search(query.words, query.characters, rcfg.pool)
    if not ranked and cfg.fusion in ("bm25f", "pool"):  # no word of the question is in the book: nothing to read
        return []
    if cfg.fusion == "pool":  # MiniLM re-ranks BM25F's first hits only (none matched: nothing to re-rank)
        near = dense.rank(query.text, [s for s, _ in ranked[:cfg.pool_sentences]])
        ranked = rrf(ranked, near, k=cfg.rrf_k)
    elif cfg.fusion != "bm25f":  # (with no word matched, the MiniLM ranking alone: "feline siblings" finds kittens)
        near = dense.search(query.text, cfg.dense_pool)
        ranked = near if cfg.fusion == "dense" else rrf(ranked, near, k=cfg.rrf_k)
    return windows(ranked, rcfg.context_sentences, len(book.sentences), cfg.window)
