"""Who answers for a book no model trained on: a conditional logit over features that need no per-book training.

Each of the book's characters c gets a few numbers that mean the same in every book (whoqa.ranker.features: its
share of the book, its mentions in the question's context, whether the question names it), and, for the first
stage's top k,

    llm               the local LLM's log-likelihood of c's name as the answer after the question's passages,
                      log-softmaxed over the k names it scored (whoqa.ranker.serve), entered as one of
                      LLM_FEATURES (as it is, clipped, its probability, its rank, with or without "the LLM's first
                      choice"), the one chosen by cross-validation on the training books (`select_llm_features`)

and p(c) = softmax_c(w . x_c) (McFadden's conditional logit: one weight per feature, shared by all characters and
books, fit by maximum likelihood). Two stages, because the LLM is slow: the first (no LLM) ranks all characters and
keeps its top k; the second, with the LLM's scores, orders those k. The probability of a top-k character is
p_in * p_stage2(c), with p_in the share of training questions whose answer was in the first stage's top k; the rest
share 1 - p_in by the first stage. Fit on other books' questions (book-level folds), the probabilities are calibrated
by construction (maximum likelihood), not by a temperature fit afterwards. (A joint form, one conditional logit over
all characters with the top k's terms added, fit at once, gave the same figures: docs/who-ranker.md.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from whoqa.core.registry import check_name
from whoqa.ranker.config import RerankConfig
from whoqa.ranker.features import BASE, FEATURE_VERSION, STAGE1
from whoqa.retrieval.passages import PassageConfig

CLIP = -10.0  # nats: below this the LLM's log-likelihood says only "not this name"


def _first_choice(l: np.ndarray) -> np.ndarray:
    return (l == l.max()).astype(float)


# how the LLM's k log-softmaxed scores l (k,) enter stage 2: name -> its columns (k, m). The LLM's sums of token
# log-probabilities span tens of nats from one question to the next, so one weight on them is too sure on some
# questions and too shy on others; bounded forms trade a little of its ranking for probabilities that hold.
LLM_FEATURES = {
    "log_softmax": lambda l: l[:, None],
    "clipped": lambda l: np.maximum(l, CLIP)[:, None],
    "probability": lambda l: np.exp(l)[:, None],
    "rank": lambda l: -np.argsort(np.argsort(-l, kind="stable"), kind="stable").astype(float)[:, None],
    "log_softmax+first": lambda l: np.column_stack([l, _first_choice(l)]),
    "clipped+first": lambda l: np.column_stack([np.maximum(l, CLIP), _first_choice(l)]),
}
SELECT = "select"  # choose among LLM_FEATURES by cross-validation on the training books
UNCHOSEN = "clipped"  # where there are too few book folds to choose: the 41 shared books' choice
L2 = 0.01  # a ridge on the weights: keeps a fold with a separable feature finite


def check_llm_features(kind: str, name: str = "LLM feature", select: bool = False) -> str:
    """`kind` if it is one of LLM_FEATURES (or SELECT, where choosing is allowed); else a ValueError naming `name`."""
    return check_name(name, kind, LLM_FEATURES, (SELECT,) if select else ())


def with_llm(x: np.ndarray, llm: list[float], kind: str = "log_softmax") -> np.ndarray:
    """Stage-2 features of the top k: (k, 3) stage-1 features and the LLM's k log-likelihoods, log-softmaxed and
    entered as LLM_FEATURES[kind] -> (k, 3 + m)."""
    check_llm_features(kind)
    return np.column_stack([x, LLM_FEATURES[kind](log_softmax(np.array(llm, dtype=float)))])  # (k, 3 + m)


def _padded(xs: list[np.ndarray], ys: list[np.ndarray]):
    """Questions with a right candidate, padded into (n, C, F) features, (n, C) mask and (n, C) answers."""
    keep = [i for i, y in enumerate(ys) if y.any()]
    n, width = len(keep), max((len(ys[i]) for i in keep), default=1)
    x = np.zeros((n, width, xs[0].shape[1] if xs else 1))  # (n, C, F)
    mask = np.zeros((n, width), dtype=bool)  # (n, C)
    right = np.zeros((n, width), dtype=bool)  # (n, C)
    for k, i in enumerate(keep):
        x[k, :len(ys[i])], mask[k, :len(ys[i])], right[k, :len(ys[i])] = xs[i], True, ys[i]
    return x, mask, right


def fit(xs: list[np.ndarray], ys: list[np.ndarray], l2: float = L2) -> np.ndarray:
    """Maximum-likelihood weights (F,) of the conditional logit: each question's features (C, F) and right
    characters (C,) bool (all of them share the probability: -log sum_{c right} p(c)). Questions whose answer is not
    among their candidates say nothing and are left out."""
    from scipy.optimize import minimize
    x, mask, right = _padded(xs, ys)
    if not len(x):
        return np.zeros(xs[0].shape[1] if xs else 1)

    def loss(w):
        s = np.where(mask, x @ w, -np.inf)  # (n, C)
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


@dataclass
class FeatureRanker:
    """The two fitted stages: stage 1's weights (3,), stage 2's (4,), k and p_in."""
    stage1: list[float]
    stage2: list[float]
    top_k: int = 5
    p_in: float = 0.7
    questions: int = 0  # the questions it was fit on
    source: str = ""  # where it was fit
    ece: float | None = None  # expected calibration error of its cross-validated probabilities, where measured
    features: dict = field(default_factory=lambda: {"stage1": list(BASE), "stage2": list(BASE) + ["llm"]})
    llm_features: str = "log_softmax"  # how the LLM's scores enter stage 2 (LLM_FEATURES)
    version: int = FEATURE_VERSION  # of the feature registry the fit was made with
    cast: bool = False  # its candidates: the book's cast (whoqa.ranker.cast), or every character cluster
    written_first: list[float] | None = None  # where set: the shares of the fit's questions whose reader-written
    #   answer, linked to a candidate, was right, [where counting also put it first, where it did not]; that
    #   candidate goes first with the share that applies (reading and counting agreeing are right more often)
    written_only: bool = False  # with written_first: where the written answer links to a candidate, the LLM is not
    #                             asked; the first stage orders the rest (and its agreement picks the share)
    written_mix: bool = False  # with written_first: the written candidate takes its place by probability among the
    #                            counted ones (scaled to the rest), not always first
    prompt: dict | None = None  # how the LLM's scores it weighs were made (passages, prompt_tokens, shots, weights;
    #                             None: the defaults)

    def llm_prompt(self) -> dict:
        """{"passages", "prompt_tokens", "shots", "weights", "llm", "shot_policy", "examples"} of the name scores
        stage 2 weighs: a fit is served with the prompt it was measured with (other prompts give other scores), the
        LLM's weights requantised as they were ("weights": a llama.cpp type such as "Q4_0", or None: the model as
        installed), by the LLM that made them ("llm": its name; None: whichever the workspace's fit folder is named
        for), and its shots drawn as they were ("shot_policy"; with "fixed", "examples": the fixed order's first
        [question, answer, book] rows, whoqa.llm.prompt.fixed_examples)."""
        return {"passages": RerankConfig.passages, "prompt_tokens": RerankConfig.prompt_tokens,
                "shots": RerankConfig.shots, "weights": None, "llm": None, "shot_policy": "question",
                "examples": None} | (self.prompt or {})

    def written_passages(self) -> PassageConfig | None:
        """The retrieval the fit's written answers read (a PassageConfig; its prompt's "written_passages", the
        fusion, where recorded; else None: the service's own)."""
        fusion = (self.prompt or {}).get("written_passages")
        return PassageConfig(fusion=fusion) if fusion else None

    def skips_llm(self, written: int | None) -> bool:
        """Whether this question's name scores go unasked: a `written_only` fit whose written answer links."""
        return self.written_only and self.written_first is not None and written is not None

    @property
    def reads_written(self) -> bool:
        """Whether the fit reads the reader's written answer (its features, or the written answer first)."""
        return self.written_first is not None or bool({"written", "written_any"} & set(self.features["stage1"]))

    def check(self, where: str = "this fit") -> "FeatureRanker":
        """The fit itself if it was made with today's features; else a ValueError naming it and the fix (a changed
        feature set would otherwise fail later as a matrix of the wrong shape, or silently mean something else)."""
        check_llm_features(self.llm_features)
        used = self.features.get("stage1")
        if not isinstance(used, list) or not used or not set(used) <= set(STAGE1) or self.version != FEATURE_VERSION \
                or len(self.stage1) != len(used):
            raise ValueError(f"{where} was made with features {used} (version {self.version}); whoqa builds "
                             f"{list(STAGE1)} (version {FEATURE_VERSION}): fit it again with `whoqa rerank "
                             f"--candidates features`")
        return self

    def first(self, x: np.ndarray) -> np.ndarray:
        """Stage 1: (C, 3) features -> (C,) the candidates' order, best first."""
        return np.argsort(-(x @ np.array(self.stage1)), kind="stable")

    def probabilities(self, x: np.ndarray, llm: list[float] | None,
                      written: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(order (C,) best first, probabilities (C,) in that order). Without the LLM's scores of the first stage's
        top k, the first stage alone (its own probabilities). `written`: the candidate the reader's written answer
        names first (an index into x), which a fit with `written_first` puts first."""
        order, probs = self._counted(x, llm)
        if self.written_first is None or written is None:
            return order, probs
        p = self.written_first[0 if order[0] == written else 1]
        rest = order != written
        scale = (1 - p) / max(float(probs[rest].sum()), 1e-12)
        order, probs = np.concatenate([[written], order[rest]]), np.concatenate([[p], probs[rest] * scale])
        if self.written_mix:
            by = np.argsort(-probs, kind="stable")  # (ties keep the written answer first)
            order, probs = order[by], probs[by]
        return order, probs

    def _counted(self, x: np.ndarray, llm: list[float] | None) -> tuple[np.ndarray, np.ndarray]:
        """The two stages' order and probabilities, before the written answer."""
        order = self.first(x)
        p1 = softmax(x @ np.array(self.stage1))  # (C,)
        if llm is None:
            return order, p1[order]
        top, rest = order[:len(llm)], order[len(llm):]
        p2 = softmax(with_llm(x[top], llm, self.llm_features) @ np.array(self.stage2))  # (k,)
        inner = np.argsort(-p2, kind="stable")
        p_rest = p1[rest] / max(p1[rest].sum(), 1e-12) * (1 - self.p_in) if len(rest) else p1[rest]
        probs = np.concatenate([self.p_in * p2[inner] if len(rest) else p2[inner], p_rest])
        return np.concatenate([top[inner], rest]), probs

    def right_probability(self, x: np.ndarray, y: np.ndarray, llm: list[float] | None) -> float:
        """The probability the two stages give the question's right characters (y (C,) bool)."""
        order, probs = self._counted(x, llm)
        return float(probs[y[order]].sum())


def fit_ranker(x1: list[np.ndarray], y1: list[np.ndarray], top_k: int,
               llm: Callable[[int, np.ndarray], list[float]] | None = None, source: str = "",
               llm_features: str = "log_softmax", stage1: tuple[str, ...] = STAGE1, cast: bool = False,
               written_first: list[int | None] | None = None, written_only: bool = False,
               written_mix: bool = False) -> FeatureRanker:
    """Both stages fit on these questions: stage 1 on all their characters; stage 2 on each question's stage-1 top
    k, with llm(i, top) giving the LLM's scores of question i's candidates `top` (indices into its characters).
    `written_first`: each question's candidate that the reader's written answer names first (or None): the fit then
    puts it first, with the share of these questions where it was right, apart where the two stages also put it
    first and where they did not (the maximum-likelihood value of each); `written_only`: where it links, the LLM is
    not asked, so the first stage alone decides that agreement; `written_mix`: it takes its place by that share
    among the counted probabilities instead of always first."""
    w1 = fit(x1, y1)
    tops = [np.argsort(-(x @ w1), kind="stable")[:top_k] for x in x1]
    p_in = float(np.mean([y[t].any() for y, t in zip(y1, tops)])) if x1 else 0.0
    width = with_llm(np.zeros((top_k, len(stage1))), [0.0] * top_k, llm_features).shape[1]  # (checks the form)
    w2 = np.zeros(width)
    if llm is not None:
        w2 = fit([with_llm(x[t], llm(i, t), llm_features) for i, (x, t) in enumerate(zip(x1, tops))],
                 [y[t] for y, t in zip(y1, tops)])
    names = {"stage1": list(stage1),
             "stage2": list(stage1) + [f"llm:{llm_features}:{k}" for k in range(width - len(stage1))]}
    ranker = FeatureRanker([float(v) for v in w1], [float(v) for v in w2], top_k, p_in, len(x1), source,
                           features=names, llm_features=llm_features, cast=cast, written_only=written_only,
                           written_mix=written_mix)
    if written_first and any(w is not None for w in written_first):
        right: dict[bool, list[bool]] = {True: [], False: []}  # counting agreeing with reading -> was it right
        for i, (x, y, w) in enumerate(zip(x1, y1, written_first)):
            if w is not None:
                counted = ranker._counted(x, llm(i, tops[i]) if llm is not None and not written_only else None)[0]
                right[bool(counted[0] == w)].append(bool(y[w]))
        every = [r for v in right.values() for r in v]
        ranker.written_first = [float(np.mean(right[k])) if right[k] else float(np.mean(every)) for k in (True, False)]
    return ranker


def select_llm_features(x1: list[np.ndarray], y1: list[np.ndarray], groups: list[int], top_k: int,
                        llm: Callable[[int, np.ndarray], list[float]],
                        stage1: tuple[str, ...] = STAGE1) -> tuple[str, dict[str, float]]:
    """The LLM_FEATURES form with the lowest mean negative log-likelihood of the right characters over folds of
    these questions (`groups`: each question's book fold; fit on the others, judged on it). Every choice is made on
    training books only: judged on fold f, the choice comes from the questions of the other folds. With fewer than 2
    folds nothing can be judged: UNCHOSEN."""
    folds = sorted(set(groups))
    if len(folds) < 2:
        return UNCHOSEN, {}
    loss = {}
    for kind in LLM_FEATURES:
        nll = []
        for g in folds:
            fit_on = [i for i, h in enumerate(groups) if h != g]
            r = fit_ranker([x1[i] for i in fit_on], [y1[i] for i in fit_on], top_k,
                           lambda j, top, fit_on=fit_on: llm(fit_on[j], top), llm_features=kind, stage1=stage1)
            nll += [-np.log(max(r.right_probability(x1[i], y1[i], llm(i, r.first(x1[i])[:top_k])), 1e-12))
                    for i, h in enumerate(groups) if h == g and y1[i].any()]
        loss[kind] = float(np.mean(nll)) if nll else 0.0
    return min(loss, key=loss.get), loss
