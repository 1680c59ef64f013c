"""Probabilities that mean what they say: temperature scaling of an ensemble's scores, and its measure (ECE).

A question's members are the score vectors (logits over the book's characters) of the models that answer it (the
trials of a cross-validated fold, or the members of a --final ensemble). Its probabilities are the members' softmax
at one temperature T, averaged:  p(c) = mean_m softmax(s_m / T)(c). T is the one number fit, by the negative
log-likelihood of the right characters on questions whose labels the judged ones never lend to it (other folds).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np

GRID = np.exp(np.linspace(np.log(0.05), np.log(50.0), 241))  # temperatures tried (a 1-D fit: a grid is exact enough)
BINS = 10  # equal-width confidence bins of the expected calibration error


@dataclass
class Item:
    """One question as answered by its members."""
    key: tuple  # (fold, question id) or any unique key
    group: int  # what may not lend it its own temperature (its fold)
    chars: np.ndarray  # (C,) candidate character ids
    scores: np.ndarray  # (members, C) logits; -inf where a member did not score a candidate
    correct: np.ndarray  # (C,) bool


def probabilities(scores: np.ndarray, temperature: float) -> np.ndarray:
    """scores (members, C) -> (C,) the members' softmax at `temperature`, averaged."""
    z = scores / temperature  # (members, C)
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)  # (members, C); exp(-inf) = 0
    return (e / e.sum(-1, keepdims=True)).mean(0)


def nll(items: list[Item], temperature: float) -> float:
    """Mean negative log of the summed probability of each question's right characters."""
    if not items:
        return 0.0
    return float(-np.mean([np.log(max(probabilities(i.scores, temperature)[i.correct].sum(), 1e-12)) for i in items]))


def fit_temperature(items: list[Item]) -> float:
    """The grid temperature with the lowest NLL on items (1.0 when there are none): every temperature at once, on
    the items padded into one array."""
    if not items:
        return 1.0
    members = max(i.scores.shape[0] for i in items)
    width = max(i.scores.shape[1] for i in items)
    s = np.full((len(items), members, width), -np.inf)  # (n, M, C)
    right = np.zeros((len(items), width), dtype=bool)  # (n, C)
    count = np.array([i.scores.shape[0] for i in items], dtype=float)  # (n,) members per item
    for k, i in enumerate(items):
        s[k, :i.scores.shape[0], :i.scores.shape[1]] = i.scores
        right[k, :len(i.correct)] = i.correct
    present = np.isfinite(s).any(-1)  # (n, M) padded members score nothing
    top = np.where(np.isfinite(s), s, -np.inf).max(-1, keepdims=True)  # (n, M, 1)
    top = np.where(np.isfinite(top), top, 0.0)
    losses = []
    for t in GRID:
        e = np.exp((s - top) / t)  # (n, M, C); exp(-inf) = 0
        p = e / np.maximum(e.sum(-1, keepdims=True), 1e-300)  # (n, M, C)
        p = (p * present[..., None]).sum(1) / count[:, None]  # (n, C) the members' average
        losses.append(-np.log(np.maximum((p * right).sum(-1), 1e-12)).mean())
    return float(GRID[int(np.argmin(losses))])


def top_confidence(items: list[Item], temperatures: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Each item's top probability and whether that top character is right: (n,), (n,) bool."""
    conf, hit = [], []
    for item, t in zip(items, temperatures):
        p = probabilities(item.scores, t)
        best = int(np.argmax(p))
        conf.append(float(p[best]))
        hit.append(bool(item.correct[best]))
    return np.array(conf), np.array(hit, dtype=bool)


def reliability(confidence: np.ndarray, correct: np.ndarray, bins: int = BINS) -> list[dict]:
    """Per equal-width confidence bin: its range, questions, mean confidence and accuracy (the reliability diagram)."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(confidence, edges[1:-1]), 0, bins - 1)
    out = []
    for b in range(bins):
        m = which == b
        out.append({"low": float(edges[b]), "high": float(edges[b + 1]), "n": int(m.sum()),
                    "confidence": float(confidence[m].mean()) if m.any() else None,
                    "accuracy": float(correct[m].mean()) if m.any() else None})
    return out


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error: sum over bins of (share of questions) x |accuracy - mean confidence|."""
    n = len(confidence)
    return float(sum(b["n"] / n * abs(b["accuracy"] - b["confidence"])
                     for b in reliability(confidence, correct, bins) if b["n"])) if n else 0.0


def ece_if_calibrated(confidence: np.ndarray, draws: int = 2000, seed: int = 13) -> dict:
    """What ECE a perfectly calibrated ranker shows with these confidences on this many questions (each question
    right with its own top probability, `draws` times, seeded): its mean and 95th percentile. ECE is biased upward
    on few questions, so an observed ECE is read against these, not against 0."""
    rng = np.random.default_rng(seed)
    conf = np.asarray(confidence, dtype=float)
    sims = np.array([ece(conf, rng.random(len(conf)) < conf) for _ in range(draws)]) if len(conf) else np.zeros(1)
    return {"mean": float(sims.mean()), "p95": float(np.quantile(sims, 0.95)), "draws": draws}


def cross_fitted(items: list[Item]) -> dict:
    """Calibration judged honestly: each group's items at the temperature fit on the other groups' items. Returns
    the temperature fit on all items (for serving), each group's, the ECE before (T = 1) and after, and the
    reliability bins after."""
    groups = sorted({i.group for i in items})
    fold_t = {g: fit_temperature([i for i in items if i.group != g]) if len(groups) > 1 else 1.0 for g in groups}
    temps = [fold_t[i.group] for i in items]
    conf, hit = top_confidence(items, temps)
    conf1, hit1 = top_confidence(items, [1.0] * len(items))
    return {"temperature": fit_temperature(items), "fold_temperatures": {str(g): t for g, t in fold_t.items()},
            "ece": ece(conf, hit), "ece_uncalibrated": ece(conf1, hit1), "nll": float(np.mean(
                [-np.log(max(probabilities(i.scores, t)[i.correct].sum(), 1e-12)) for i, t in zip(items, temps)]))
            if items else 0.0, "reliability": reliability(conf, hit), "reliability_uncalibrated": reliability(conf1, hit1),
            "questions": len(items)}


def plot_reliability(reports: dict[str, dict], path) -> None:
    """A reliability diagram per report (name -> cross_fitted() output, or any {"ece", "reliability"}), calibrated
    and not, into a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(reports), figsize=(4.2 * len(reports), 4.2), squeeze=False)
    for ax, (name, rep) in zip(axes[0], reports.items()):
        ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
        for key, label, style in (("reliability_uncalibrated", f"T=1 (ECE {rep.get('ece_uncalibrated', 0):.3f})", "o:"),
                                  ("reliability", f"fitted on other folds (ECE {rep['ece']:.3f})", "s-")):
            bins = [b for b in rep.get(key, []) if b["n"]]  # (a ranker fit by maximum likelihood, the feature
            # ranker, has no uncalibrated form)
            if bins:
                ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], style, label=label)
            if key == "reliability":  # how many questions each point stands on
                for b in bins:
                    ax.annotate(str(b["n"]), (b["confidence"], b["accuracy"]), textcoords="offset points",
                                xytext=(5, -10), fontsize=7)
        ax.set_title("\n".join(textwrap.wrap(name, 48)), fontsize=8)
        ax.set_xlabel("top answer's probability")
        ax.set_ylabel("share right")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
