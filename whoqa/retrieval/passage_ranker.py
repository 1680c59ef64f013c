"""Mou et al. (2021, §4.2 and Appendix B)'s trained passage ranker for questions about a new book, without passage
labels: a cross-encoder (the bundled MiniLM) re-ranks BM25F's first `candidates` windows, trained on pseudo labels.

- **Distant supervision** (their Method 1): for a training question, BM25F's windows for the question (C_Q) and for
  the question with its answer (C_Q+A); a window of C_Q that overlaps one of C_Q+A and holds a span of ROUGE-L above
  `alpha` against an answer is a positive, a window of C_Q with no span above `beta` a negative.
- **ICT pretraining** (their Method 2, Lee et al. 2019's inverse cloze task): in a passage of the book, the sentence
  whose words carry most pointwise mutual information with the book (its "predictiveness", at least 3 content words)
  is a pseudo-question; the passage without it is its positive, BM25F's best windows for it elsewhere its negatives.
  It needs only the book's text, so every book may take part.

Both train the same listwise objective (their Eq. 2): a softmax over one positive and `negatives` negatives.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, replace

from whoqa.core.book import Book, window_text
from whoqa.core.metrics import best_span_rouge_l
from whoqa.core.seed import SEED
from whoqa.core.words import FUNCTION_WORDS, answer_tokens
from whoqa.retrieval.bm25f import Window


@dataclass
class PassageRankerConfig:
    candidates: int = 32  # BM25F windows re-ranked (Mou et al.: BM25's top 32)
    width: int = 5  # sentences a window holds (the served passages')
    negatives: int = 3  # negatives beside each positive in a training list
    positives: int = 2  # at most this many lists per training question (DS) or per passage (ICT: one)
    alpha: float = 0.5  # DS positive: a span of ROUGE-L above alpha against an answer (the answer-bearing criterion)
    beta: float = 0.2  # DS negative: no span above beta
    ict_passages: int = 60  # ICT pseudo-questions drawn per book
    ict_negative_pool: int = 30  # BM25F's best windows for a pseudo-question its negatives are drawn from
    epochs: int = 1
    lr: float = 2e-5
    batch_lists: int = 4  # lists per step (each 1 + negatives pairs)
    max_length: int = 128  # question + window tokens the cross-encoder reads
    seed: int = SEED


def passages(n_sentences: int, width: int) -> list[Window]:
    """The book cut into passages of `width` sentences that do not overlap (Mou et al.: 200-token trunks), so that a
    passage's text is the same whichever question finds it and every candidate is the same size."""
    return [Window(a, min(n_sentences, a + width) - 1, 0.0) for a in range(0, n_sentences, width)]


def candidate_windows(ob, text: str, cfg: PassageRankerConfig) -> list[Window]:
    """BM25F's first cfg.candidates passages for text's content words (its whole words where none match): a
    passage scores its best sentence's BM25F score."""
    query = ob.query(text)
    k = 8 * cfg.candidates * cfg.width
    ranked = ob.index.search(query.content, query.characters, k) or ob.index.search(query.words, query.characters, k)
    cut = passages(len(ob.book.sentences), cfg.width)
    best: dict[int, float] = {}
    for sid, score in ranked:
        if 0 <= sid < len(ob.book.sentences):
            best.setdefault(sid // cfg.width, float(score))
    return [cut[p]._replace(score=score) for p, score in sorted(best.items(), key=lambda x: -x[1])[:cfg.candidates]]


def answer_rouge(book: Book, w: Window, answers: list[str], cache: dict | None = None) -> float:
    """The best span ROUGE-L of a window against any answer (Mou et al.'s coverage ROUGE-L, per window)."""
    key = (w.first, w.last)
    if cache is not None and key in cache:
        return cache[key]
    toks = answer_tokens(window_text(book, w.first, w.last))
    value = max((best_span_rouge_l(answer_tokens(a), toks) for a in answers if a.strip()), default=0.0)
    if cache is not None:
        cache[key] = value
    return value


def ds_lists(ob, question: str, answers: list[str], cfg: PassageRankerConfig, rng: random.Random
             ) -> list[tuple[str, list[str]]]:
    """(question, [positive, negative, ...] texts) lists by distant supervision; none where no window qualifies."""
    c_q = candidate_windows(ob, question, cfg)
    c_qa = candidate_windows(ob, f"{question} {' '.join(answers)}", cfg)
    cache: dict = {}
    near = lambda w: any(not (w.last < v.first or w.first > v.last) for v in c_qa)  # noqa: E731
    pos = [w for w in c_q if near(w) and answer_rouge(ob.book, w, answers, cache) > cfg.alpha]
    neg = [w for w in c_q if answer_rouge(ob.book, w, answers, cache) < cfg.beta]
    if not pos or len(neg) < cfg.negatives:
        return []
    return [(question, [window_text(ob.book, w.first, w.last) for w in [p] + rng.sample(neg, cfg.negatives)])
            for p in pos[:cfg.positives]]


class BookPMI:
    """Pointwise mutual information of a word with a book, log p(w | book) / p(w), p(w) over a corpus of books'
    content-word counts (add-one smoothed)."""

    def __init__(self, counts: dict[str, Counter]):
        self.counts = counts
        self.corpus = Counter()
        for c in counts.values():
            self.corpus.update(c)
        self.total = sum(self.corpus.values())
        self.sizes = {b: sum(c.values()) for b, c in counts.items()}

    def __call__(self, book_id: str, word: str) -> float:
        c = self.counts[book_id]
        return math.log(((c[word] + 1) / (self.sizes[book_id] + 1)) / ((self.corpus[word] + 1) / (self.total + 1)))


def content_words(words: list[str]) -> list[str]:
    return [w.lower() for w in words if w[:1].isalnum() and w.lower() not in FUNCTION_WORDS]


def book_counts(book: Book) -> Counter:
    return Counter(w for s in range(len(book.sentences)) for w in content_words(book.sentence_words(s)))


def ict_lists(ob, pmi: BookPMI, cfg: PassageRankerConfig, rng: random.Random) -> list[tuple[str, list[str]]]:
    """(pseudo-question, [its passage without it, negatives...] texts) lists from a book's own text (Appendix B)."""
    book = ob.book
    cut = passages(len(book.sentences), cfg.width)
    out = []
    for p in rng.sample(cut, min(cfg.ict_passages, len(cut))):
        best, best_f = None, -math.inf
        for s in p.sentences:
            words = content_words(book.sentence_words(s))
            if len(words) >= 3:
                f = sum(pmi(book.id, w) for w in words)
                if f > best_f:
                    best, best_f = s, f
        if best is None:
            continue
        pq = " ".join(book.sentence_words(best))
        rest = [w for w in candidate_windows(ob, pq, replace(cfg, candidates=cfg.ict_negative_pool))
                if w.first != p.first]
        if len(rest) < cfg.negatives:
            continue
        out.append((pq, [window_text(book, p.first, p.last, without=best)]
                    + [window_text(book, w.first, w.last) for w in rng.sample(rest, cfg.negatives)]))
    return out


def train_lists(ranker, lists: list[tuple[str, list[str]]], cfg: PassageRankerConfig, progress: bool = True
                ) -> list[float]:
    """Softmax cross-entropy over each list (its first text the positive) for a `bert_ranker.CrossEncoder`; returns
    every step's loss."""
    torch = ranker.torch
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    opt = torch.optim.AdamW(ranker.model.parameters(), lr=cfg.lr)
    ranker.model.train()
    order = [i for _ in range(cfg.epochs) for i in rng.sample(range(len(lists)), len(lists))]
    steps = [order[i:i + cfg.batch_lists] for i in range(0, len(order), cfg.batch_lists)]
    from whoqa.core.progress import bar
    losses = []
    for step in bar(steps, desc="train passage ranker", unit="step", progress=progress):
        qs = [lists[i][0] for i in step for _ in lists[i][1]]
        ps = [t for i in step for t in lists[i][1]]
        logits = ranker.model(**ranker._enc(qs, ps)).logits.view(len(step), -1)  # (lists, 1 + negatives)
        first = torch.zeros(len(step), dtype=torch.long, device=logits.device)  # (lists,): the positive leads
        loss = torch.nn.functional.cross_entropy(logits, first)
        if not torch.isfinite(loss):
            raise FloatingPointError("passage ranker loss is NaN/inf: lower its lr or check the training lists")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    ranker.model.eval()
    return losses


def rerank(ranker, book: Book, question: str, wins: list[Window], batch_size: int = 32) -> list[Window]:
    """wins ordered by the cross-encoder's score for the question (the score kept in each Window)."""
    scores = ranker.score(question, [window_text(book, w.first, w.last) for w in wins], batch_size)
    return [Window(w.first, w.last, float(s)) for w, s in sorted(zip(wins, scores), key=lambda x: -x[1])]
