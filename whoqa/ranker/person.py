"""Whether a name cluster the rules keep is a person, by a fitted logistic rule over how the book uses the name.

The cast's rules (`whoqa.ranker.cast`) each read one signal against a fixed share ("a name after in, into, near ...
this often is a place"); a place such as "Paris" passes each of them a little under its bar. The fitted rule reads the
same signals together, as shares of the cluster's proper-name mentions (objects of a preposition, subjects, speakers,
owners, after "of"), with the book's own spelling of the word and Gutenberg's he/she table, and is fitted on the
readers' fit half of hand labels (`whoqa eval-cast --labels --fit-person`), never on the check half. A cluster whose
probability of being a person falls below the fit's threshold leaves the cast, with that reason. Measured, not served:
on the check half it raised the people among the 40 most mentioned from 85.52% to 88.49%, short of the 95% asked.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from whoqa.core.book import Book
from whoqa.core.lexicon import gender_table

SPEECH = {"say", "ask", "cry", "reply", "answer", "exclaim", "shout", "whisper", "murmur", "continue", "add",
          "declare", "repeat", "mutter", "call", "laugh", "smile", "nod", "think", "know", "feel", "see", "look"}
#          (verbs whose subject is nearly always a person: who speaks, thinks, looks)
PREPOSITIONS_TO_PLACES = {"in", "into", "to", "from", "at", "near", "through", "across", "toward", "towards",
                          "within", "beyond", "outside", "inside", "around", "throughout", "between", "over"}
FEATURES = ("mentions", "preposition_object", "after_place_preposition", "after_of", "subject", "speaker",
            "owner", "compound", "after_article", "lower_case", "known_name", "titled", "words", "pronoun_share")


def features(book: Book, cid: int, proper: list, lower: Counter, capital: Counter, words: list[str],
             titled: bool) -> dict[str, float]:
    """FEATURES of one cluster: shares of its proper-name mentions, and what its name is (`words`: its name without
    titles; `titled`: whether some name of it carries a title)."""
    c = book.characters[cid]
    tokens = book.tokens
    n = max(len(proper), 1)
    heads = [tokens[m.end] for m in proper]
    before = [tokens[m.start - 1].word.lower() if m.start else "" for m in proper]
    after = [tokens[m.end + 1].word if m.end + 1 < len(tokens) else "" for m in proper]
    words = words or [c.name]
    head = words[-1]
    low, cap = lower[head.lower()], capital[head]
    refs = sum(gender_table().get(words[0].lower(), (0.0, 0.0)))
    return {"mentions": math.log1p(len(proper)),
            "preposition_object": sum(t.dep == "pobj" for t in heads) / n,
            "after_place_preposition": sum(w in PREPOSITIONS_TO_PLACES for w in before) / n,
            "after_of": sum(w == "of" for w in before) / n,
            "subject": sum(t.dep in ("nsubj", "nsubjpass") for t in heads) / n,
            "speaker": sum(t.dep == "nsubj" and tokens[t.head].lemma.lower() in SPEECH for t in heads) / n,
            "owner": sum(w in ("'s", "’s") for w in after) / n,
            "compound": sum(t.dep == "compound" for t in heads) / n,
            "after_article": sum(w in ("the", "a", "an") for w in before) / n,
            "lower_case": low / max(low + cap, 1),
            "known_name": math.log1p(refs) / 10,
            "titled": float(titled),
            "words": float(len(words) > 1),
            "pronoun_share": max(c.count - len(proper), 0) / max(c.count, 1)}


@dataclass
class PersonFit:
    """A logistic rule: P(person) = sigmoid(bias + weights . features), dropped below `threshold`."""
    weights: dict[str, float]
    bias: float
    threshold: float
    fitted_on: dict = field(default_factory=dict)  # what it was fitted on (labels' sha256, books, examples)

    def p_person(self, feats: dict[str, float]) -> float:
        z = self.bias + sum(self.weights.get(k, 0.0) * v for k, v in feats.items())
        return 1.0 / (1.0 + math.exp(-z))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> tuple[np.ndarray, float]:
    """Newton's method on the L2-penalised log loss (the bias unpenalised): x (N, F), y (N,) in {0, 1}."""
    n, f = x.shape
    xb = np.hstack([x, np.ones((n, 1))])  # (N, F+1)
    w = np.zeros(f + 1)
    penalty = np.full(f + 1, l2)
    penalty[-1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))  # (N,)
        grad = xb.T @ (p - y) + penalty * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(penalty) + 1e-9 * np.eye(f + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])
