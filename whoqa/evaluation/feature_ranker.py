"""Who answers for a book no model trained on: a conditional logit over features that need no per-book training.

Each of the book's characters c gets a few numbers that mean the same in every book:

    book_share        log of c's share of the book's character mentions (book frequency, as a feature)
    context_mentions  log(1 + c's mentions in the question's BM25F context, its first CONTEXT_SENTENCES sentences)
    named             1 if the question itself names c (who is then rarely the answer: "Who does Glenister love?")
    llm               the local LLM's log-likelihood of c's name as the answer after the question's passages,
                      log-softmaxed over the k names it scored (whoqa.evaluation.rerank)

and p(c) = softmax_c(w . x_c) (McFadden's conditional logit: one weight per feature, shared by all characters and
books, fit by maximum likelihood). Two stages, because the LLM is slow: the first (no LLM) ranks all characters and
keeps its top k; the second, with the LLM's scores, orders those k. The probability of a top-k character is
p_in * p_stage2(c), with p_in the share of training questions whose answer was in the first stage's top k; the rest
share 1 - p_in by the first stage. Fit on other books' questions (book-level folds), the probabilities are calibrated
by construction (maximum likelihood), not by a temperature fit afterwards.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

STAGE1 = ("book_share", "context_mentions", "named")
STAGE2 = STAGE1 + ("llm",)
CONTEXT_SENTENCES = 100  # the question's BM25F context, as the memory network reads it (MemNetConfig's memories)
L2 = 0.01  # a ridge on the weights: keeps a fold with a separable feature finite


def character_features(characters: list[dict], context: Counter, named: set[int]) -> tuple[list[int], np.ndarray]:
    """(ids, (C, 3) stage-1 features) for a book's characters (the Who set's records: id, count) given the question's
    context mentions (character id -> count) and the characters the question names."""
    total = sum(c["count"] for c in characters) or 1
    ids = [c["id"] for c in characters]
    x = np.array([[np.log(max(c["count"], 1) / total), np.log1p(context[c["id"]]), float(c["id"] in named)]
                  for c in characters], dtype=float).reshape(-1, len(STAGE1))  # (C, 3)
    return ids, x


def with_llm(x: np.ndarray, llm: list[float]) -> np.ndarray:
    """Stage-2 features of the top k: (k, 3) stage-1 features and the LLM's k log-likelihoods -> (k, 4)."""
    return np.column_stack([x, log_softmax(np.array(llm, dtype=float))])  # (k, 4)


def _padded(xs: list[np.ndarray], ys: list[np.ndarray], offsets: list[np.ndarray] | None = None):
    """Questions with a right candidate, padded into (n, C, F) features, (n, C) mask, (n, C) answers and (n, C)
    fixed offsets of the logits (0 without)."""
    keep = [i for i, y in enumerate(ys) if y.any()]
    n, width = len(keep), max((len(ys[i]) for i in keep), default=1)
    x = np.zeros((n, width, xs[0].shape[1] if xs else 1))  # (n, C, F)
    mask = np.zeros((n, width), dtype=bool)  # (n, C)
    right = np.zeros((n, width), dtype=bool)  # (n, C)
    off = np.zeros((n, width))  # (n, C)
    for k, i in enumerate(keep):
        x[k, :len(ys[i])], mask[k, :len(ys[i])], right[k, :len(ys[i])] = xs[i], True, ys[i]
        if offsets is not None:
            off[k, :len(ys[i])] = offsets[i]
    return x, mask, right, off


def fit(xs: list[np.ndarray], ys: list[np.ndarray], l2: float = L2,
        offsets: list[np.ndarray] | None = None) -> np.ndarray:
    """Maximum-likelihood weights (F,) of the conditional logit: each question's features (C, F) and right
    characters (C,) bool (all of them share the probability: -log sum_{c right} p(c)); `offsets` (C,) per question
    are added to the logits with a fixed weight of 1. Questions whose answer is not among their candidates say
    nothing and are left out."""
    from scipy.optimize import minimize
    x, mask, right, off = _padded(xs, ys, offsets)
    if not len(x):
        return np.zeros(xs[0].shape[1] if xs else 1)

    def loss(w):
        s = np.where(mask, x @ w + off, -np.inf)  # (n, C)
        s = s - s.max(1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(1, keepdims=True)  # (n, C)
        q = p * right
        r = q.sum(1, keepdims=True)  # (n, 1) the right characters' probability
        grad = ((p - q / r)[..., None] * x).sum((0, 1)) + 2 * l2 * w  # E_p[x] - E_{p | right}[x]
        return float(-np.log(r).sum() + l2 * w @ w), grad
    return minimize(loss, np.zeros(x.shape[2]), jac=True, method="L-BFGS-B").x


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def joint_features(x: np.ndarray, top: np.ndarray, llm: list[float]) -> np.ndarray:
    """The joint form's features of every character (C, 8): its stage-1 features; then, for the first stage's top k,
    1 (a bias: how much likelier a top-k character is than its features say) and its stage-2 features, 0 for the
    rest."""
    f = np.zeros((len(x), len(STAGE1) + 1 + len(STAGE2)))  # (C, 8)
    f[:, :len(STAGE1)] = x
    f[top, len(STAGE1)] = 1.0
    f[top, len(STAGE1) + 1:] = with_llm(x[top], llm)
    return f


@dataclass
class FeatureRanker:
    """The two fitted stages: stage 1's weights (3,), stage 2's (4,; 5 in the joint form), k and p_in.

    form "product": a top-k character's probability is p_in x softmax over the k of stage 2; the rest share 1 - p_in
    by stage 1. form "joint": one conditional logit over all the book's characters (`joint_features`: everyone's
    stage-1 features, and for stage 1's top k a bias and their stage-2 features; stage2 holds its 8 weights), fit at
    once by maximum likelihood on every question, so how sure the answer is among the k is learned per question
    instead of a constant p_in."""
    stage1: list[float]
    stage2: list[float]
    top_k: int = 5
    p_in: float = 0.7
    questions: int = 0  # the questions it was fit on
    source: str = ""  # where it was fit
    ece: float | None = None  # expected calibration error of its cross-validated probabilities, where measured
    features: dict = field(default_factory=lambda: {"stage1": list(STAGE1), "stage2": list(STAGE2)})
    form: str = "product"

    def first(self, x: np.ndarray) -> np.ndarray:
        """Stage 1: (C, 3) features -> (C,) the candidates' order, best first."""
        return np.argsort(-(x @ np.array(self.stage1)), kind="stable")

    def probabilities(self, x: np.ndarray, llm: list[float] | None) -> tuple[np.ndarray, np.ndarray]:
        """(order (C,) best first, probabilities (C,) in that order). Without the LLM's scores of the first stage's
        top k, the first stage alone (its own probabilities)."""
        order = self.first(x)
        p1 = softmax(x @ np.array(self.stage1))  # (C,)
        if llm is None:
            return order, p1[order]
        if self.form == "joint":
            p = softmax(joint_features(x, order[:len(llm)], llm) @ np.array(self.stage2))  # (C,)
            order = np.argsort(-p, kind="stable")  # (C,) a top-k character the LLM rules out may fall below the rest
            return order, p[order]
        top, rest = order[:len(llm)], order[len(llm):]
        p2 = softmax(with_llm(x[top], llm) @ np.array(self.stage2))  # (k,)
        inner = np.argsort(-p2, kind="stable")
        p_rest = p1[rest] / max(p1[rest].sum(), 1e-12) * (1 - self.p_in) if len(rest) else p1[rest]
        probs = np.concatenate([self.p_in * p2[inner] if len(rest) else p2[inner], p_rest])
        return np.concatenate([top[inner], rest]), probs


FORMS = ("product", "joint")


def fit_ranker(x1: list[np.ndarray], y1: list[np.ndarray], top_k: int,
               llm: Callable[[int, np.ndarray], list[float]] | None = None, source: str = "",
               form: str = "product") -> FeatureRanker:
    """Both stages fit on these questions: stage 1 on all their characters; stage 2 on each question's stage-1 top
    k (form "product"), or on all its characters with stage 1's scores as fixed offsets (form "joint"), with
    llm(i, top) giving the LLM's scores of question i's candidates `top` (indices into its characters)."""
    if form not in FORMS:
        raise ValueError(f"unknown feature-ranker form {form!r}: use one of {', '.join(FORMS)}")
    w1 = fit(x1, y1)
    tops = [np.argsort(-(x @ w1), kind="stable")[:top_k] for x in x1]
    p_in = float(np.mean([y[t].any() for y, t in zip(y1, tops)])) if x1 else 0.0
    w2 = np.zeros(len(STAGE2)) if form == "product" else np.concatenate([w1, np.zeros(1 + len(STAGE2))])
    if llm is not None and form == "joint":
        w2 = fit([joint_features(x, t, llm(i, t)) for i, (x, t) in enumerate(zip(x1, tops))], y1)
    elif llm is not None:
        w2 = fit([with_llm(x[t], llm(i, t)) for i, (x, t) in enumerate(zip(x1, tops))],
                 [y[t] for y, t in zip(y1, tops)])
    feats = {"stage1": list(STAGE1), "stage2": list(STAGE2) if form == "product" else
             list(STAGE1) + ["in_top_k"] + [f"top_k_{f}" for f in STAGE2]}
    return FeatureRanker([float(v) for v in w1], [float(v) for v in w2], top_k, p_in, len(x1), source,
                         features=feats, form=form)


# Fit on all 254 Who questions of the 41 shared books with Qwen2.5-Coder-0.5B's scores (`whoqa rerank
# 'memnet+pretrain+salience[bm25f]+by-book' --workspace ws41 --candidates features`, 2026-11-24, docs/who-ranker.md):
# what `ask --rerank` serves where its workspace has no fit of its own. Its book-level CV: P@1 28.35, P@5 71.65,
# MRR 0.450, ECE 0.059 (book frequency 17.32 / 68.11 / 0.389).
MEASURED = {"stage1": [0.573, 0.3813, -1.1887], "stage2": [0.0632, 0.2091, -1.1338, 0.0351], "top_k": 5,
            "p_in": 0.7126, "questions": 254, "ece": 0.059,
            "source": "the 254 Who questions of the 41 shared books (book-level CV: docs/who-ranker.md)"}
