"""Metrics: ranking metrics for Who questions, and the text metrics of the NarrativeQA papers.

Text conventions (what nlg-eval computes, and what Kocisky et al., Frermann and Mou et al. report):
  * ROUGE-L as in the COCO caption code used by nlg-eval: LCS over space-split tokens, precision and recall each
    maximised over the references, F with beta = 1.2; averaged over questions.
  * BLEU-1 and BLEU-4 as in that code: corpus-level, clipped n-gram counts over all references, brevity penalty with
    the reference length closest to each hypothesis (ties: the shorter).
  * EM and F1 as in SQuAD: lowercase, punctuation and articles (a/an/the) removed, max over the references.
  * rouge-score's ROUGE-L F1 (beta = 1, its own tokeniser, max over references): the other convention, reported
    under its own name for comparison with recent work.
Before the nlg-eval metrics, `normalize_text` lowercases and splits punctuation from words (regex word/punctuation
tokens joined by single spaces); `whoqa score --raw` skips it to reproduce nlg-eval on pre-tokenised files exactly.
"""
from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Iterable, Sequence

ROUGE_BETA = 1.2
_TOKEN = re.compile(r"\w+|[^\w\s]")


# ---- ranking (Who questions) ----------------------------------------------------------------------------------
def rank_of_first_correct(ranking: Sequence[int], correct: Iterable[int]) -> int | None:
    """1-based rank of the best-ranked correct id, or None when no correct id is ranked."""
    correct = set(correct)
    for r, c in enumerate(ranking, start=1):
        if c in correct:
            return r
    return None


def ranking_metrics(rankings: Sequence[Sequence[int]], corrects: Sequence[Iterable[int]]) -> dict:
    """P@1, P@5 (in %) and MRR over questions; a question may have several correct ids."""
    if not rankings:
        return {"p@1": 0.0, "p@5": 0.0, "mrr": 0.0, "n": 0}
    ranks = [rank_of_first_correct(r, c) for r, c in zip(rankings, corrects)]
    n = len(ranks)
    return {"p@1": 100 * sum(1 for r in ranks if r == 1) / n,
            "p@5": 100 * sum(1 for r in ranks if r is not None and r <= 5) / n,
            "mrr": sum(1 / r for r in ranks if r is not None) / n,
            "n": n}


def book_bootstrap(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]], corrects: Sequence[Iterable[int]],
                   books: Sequence[str], samples: int = 2000, seed: int = 13) -> dict:
    """Spread of two systems' P@1 / P@5 / MRR over the same questions, resampling whole books (questions of a book are
    not independent): each metric's standard deviation for a, and a - b's mean, sd and 95% interval."""
    import numpy as np
    corrects = [list(c) for c in corrects]
    per = {}
    for name, rankings in (("a", a), ("b", b)):
        ranks = [rank_of_first_correct(r, c) for r, c in zip(rankings, corrects)]
        per[name] = np.array([[100.0 * (r == 1), 100.0 * (r is not None and r <= 5), 1 / r if r else 0.0]
                              for r in ranks])  # (n, 3)
    return paired_book_bootstrap(per["a"], per["b"], books, ("p@1", "p@5", "mrr"), samples, seed)


def paired_book_bootstrap(a, b, books: Sequence[str], keys: Sequence[str], samples: int = 2000, seed: int = 13) -> dict:
    """Per-question scores of two systems on the same questions, a and b (n, len(keys)), resampled by whole books: a's
    standard deviation per key, and a - b's mean, sd and 95% interval."""
    import numpy as np
    a, b = np.asarray(a, dtype=float).reshape(len(books), -1), np.asarray(b, dtype=float).reshape(len(books), -1)
    ids = sorted(set(books))
    rows = {d: [i for i, x in enumerate(books) if x == d] for d in ids}
    rng = np.random.default_rng(seed)
    ma, md = [], []
    for _ in range(samples):
        idx = [i for d in rng.choice(len(ids), len(ids)) for i in rows[ids[d]]]
        ma.append(a[idx].mean(0))
        md.append(a[idx].mean(0) - b[idx].mean(0))
    ma, md = np.array(ma), np.array(md)  # (samples, len(keys))
    return {"books": len(ids), "samples": samples, "sd": dict(zip(keys, ma.std(0).round(4).tolist())),
            "difference": {k: {"mean": float(round(a[:, j].mean() - b[:, j].mean(), 4)),
                               "sd": float(round(md[:, j].std(), 4)),
                               "ci95": [float(round(v, 4)) for v in np.percentile(md[:, j], [2.5, 97.5])]}
                           for j, k in enumerate(keys)}}


# ---- text metrics ---------------------------------------------------------------------------------------------
def normalize_text(s: str) -> str:
    return " ".join(_TOKEN.findall(s.lower()))


def _lcs(a: list[str], b: list[str]) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str, references: Sequence[str], beta: float = ROUGE_BETA) -> float:
    """COCO-caption ROUGE-L of one candidate (tokens split on single spaces, as that code does)."""
    if not references:
        raise ValueError("rouge_l needs at least one reference")
    c = candidate.split(" ")
    prec, rec = [], []
    for ref in references:
        r = ref.split(" ")
        lcs = _lcs(r, c)
        prec.append(lcs / len(c))
        rec.append(lcs / len(r))
    p, r = max(prec), max(rec)
    if p == 0 or r == 0:
        return 0.0
    return (1 + beta ** 2) * p * r / (r + beta ** 2 * p)


def best_span_rouge_l(reference: list[str], text: list[str], beta: float = ROUGE_BETA) -> float:
    """The best ROUGE-L (as `rouge_l`) of any span of `text` against `reference` (both token lists): how well the
    text holds the reference somewhere in it (Mou et al.'s answer-bearing passage test). The best span starts and
    ends on a word of the reference (trimming others loses no LCS and gains precision), so only those are tried."""
    if not reference or not text:
        return 0.0
    ref = set(reference)
    at = [i for i, w in enumerate(text) if w in ref]
    best = 0.0
    for n, i in enumerate(at):
        for j in at[n:n + 4 * len(reference)]:
            span = text[i:j + 1]
            if len(span) > 4 * len(reference):
                break
            lcs = _lcs(reference, span)
            p, r = lcs / len(span), lcs / len(reference)
            if p and r:
                best = max(best, (1 + beta ** 2) * p * r / (r + beta ** 2 * p))
    return best


def _ngrams(words: list[str], n: int) -> Counter:
    return Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


def corpus_bleu(candidates: Sequence[str], references: Sequence[Sequence[str]], max_n: int = 4) -> list[float]:
    """BLEU-1..max_n as the COCO caption code computes them (its 'closest' reference length, its smoothing)."""
    tiny, small = 1e-15, 1e-9
    guess, correct = [0] * max_n, [0] * max_n
    testlen = reflen = 0
    for cand, refs in zip(candidates, references):
        words = cand.split()
        ref_words = [r.split() for r in refs]
        testlen += len(words)
        reflen += min((abs(len(r) - len(words)), len(r)) for r in ref_words)[1]
        for n in range(1, max_n + 1):
            max_ref = Counter()
            for r in ref_words:
                for g, k in _ngrams(r, n).items():
                    max_ref[g] = max(max_ref[g], k)
            cn = _ngrams(words, n)
            guess[n - 1] += max(len(words) - n + 1, 0)
            correct[n - 1] += sum(min(k, max_ref[g]) for g, k in cn.items())
    bleus, prod = [], 1.0
    for k in range(max_n):
        prod *= (correct[k] + tiny) / (guess[k] + small)
        bleus.append(prod ** (1.0 / (k + 1)))
    ratio = (testlen + tiny) / (reflen + small)
    if ratio < 1:
        bleus = [b * math.exp(1 - 1 / ratio) for b in bleus]
    return bleus


def _squad_normalize(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction: str, references: Sequence[str]) -> float:
    p = _squad_normalize(prediction)
    return float(any(p == _squad_normalize(r) for r in references))


def token_f1(prediction: str, references: Sequence[str]) -> float:
    """SQuAD F1, max over references; when either side normalises to nothing, 1 if both do, else 0."""
    best = 0.0
    p = _squad_normalize(prediction).split()
    for ref in references:
        g = _squad_normalize(ref).split()
        if not p or not g:
            best = max(best, float(p == g))
            continue
        same = sum((Counter(p) & Counter(g)).values())
        if same:
            prec, rec = same / len(p), same / len(g)
            best = max(best, 2 * prec * rec / (prec + rec))
    return best


def rouge_score_l(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """rouge-score's ROUGE-L F1 (max over references), the convention of recent work; mean x 100."""
    from rouge_score import rouge_scorer
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    vals = [scorer.score_multi(list(refs), pred)["rougeL"].fmeasure for pred, refs in zip(predictions, references)]
    return 100 * sum(vals) / len(vals) if vals else 0.0


class _NoSynonyms:
    """A WordNet with no synsets: METEOR's synonym stage then matches nothing (exact and stem stages only)."""

    @staticmethod
    def synsets(_word):
        return []


def wordnet():
    """NLTK's WordNet when its data is installed (`python -m nltk.downloader wordnet`), else None."""
    from nltk.corpus import wordnet as wn
    try:
        wn.ensure_loaded()
        return wn
    except LookupError:
        return None


def meteor(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> tuple[float, bool]:
    """(mean METEOR x 100, whether WordNet synonyms were matched): NLTK's METEOR (Banerjee and Lavie 2005; alpha 0.9,
    beta 3, gamma 0.5; max over references), on lower-cased whitespace tokens. Without WordNet's data its exact and
    Porter-stem stages only, and the result says so (LiteraryQA finds METEOR tracks human judgment best)."""
    from nltk.translate.meteor_score import meteor_score
    wn = wordnet()
    vals = [meteor_score([r.split() for r in refs], pred.split(), wordnet=wn or _NoSynonyms())
            for pred, refs in zip(predictions, references)]
    return (100 * sum(vals) / len(vals) if vals else 0.0), wn is not None


def text_metrics(predictions: Sequence[str], references: Sequence[Sequence[str]], normalize: bool = True) -> dict:
    """All text metrics (x 100) over questions; references[i] holds question i's answers."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} reference sets")
    if not predictions:
        return {"n": 0}
    for i, refs in enumerate(references):
        if not refs:
            raise ValueError(f"question {i} has no reference answer")
    prep = normalize_text if normalize else (lambda s: s.strip())
    preds = [prep(p) for p in predictions]
    refs = [[prep(r) for r in rs] for rs in references]
    bleu = corpus_bleu(preds, refs)
    n = len(preds)
    met, synonyms = meteor(preds, refs)
    return {
        "rouge_l": 100 * sum(rouge_l(p, r) for p, r in zip(preds, refs)) / n,
        "bleu_1": 100 * bleu[0], "bleu_4": 100 * bleu[3],
        "em": 100 * sum(exact_match(p, r) for p, r in zip(predictions, references)) / n,
        "f1": 100 * sum(token_f1(p, r) for p, r in zip(predictions, references)) / n,
        "rouge_l_f1_rouge_score": rouge_score_l(predictions, references),
        "meteor": met, "meteor_synonyms": synonyms,
        "n": n,
    }
