"""The pronoun resolver's weights learned from LitBank's gold coreference (`whoqa train-coref --litbank DIR`).

The resolver (data_prep.coref) scores each candidate antecedent of a he/she/him/her... as a weighted sum of features
the engine already has: sentence distance, salience, gender agreement, subject and parallel roles, quotation
structure, reflexive binding, vocatives, name vs pronoun. Here those weights become a mention-ranking model: for every
pronoun the engine scored, the candidates are the characters it considered, the correct ones those whose names align
with the pronoun's gold entity, and the weights maximise the log-likelihood of the correct candidates under a softmax
over the candidates (L2 pull towards the hand-set weights, which is all a small corpus can afford).

Learned weights are written with LitBank's attribution (CC BY 4.0); they would ship as
data_prep/resources/coref_weights.json if they beat the rules, which they do not yet (docs/pipeline.md), so none
ship; `whoqa prepare --coref-weights FILE` prepares books with a weights file. Evaluation is cross-validated by document (`whoqa eval-coref --resolver learned`): a document is never resolved
with weights learned on it.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from data_prep.coref import FEATURES, Weights
from data_prep.litbank import doc_folds
from data_prep.litbank import align, per_mentions
from data_prep.litbank import predicted
from data_prep.engine_spacy import SpacyEngine
from data_prep.litbank import load_litbank, parse_docs
from whoqa.core.artifacts import read_json

log = logging.getLogger(__name__)
WEIGHTS_FILE = Path(__file__).with_name("resources") / "coref_weights.json"
ATTRIBUTION = ("Learned from LitBank (Bamman, Lewke and Mansoor 2020; https://github.com/dbamman/litbank), "
               "CC BY 4.0, with `whoqa train-coref`.")


def instances(doc, engine, parsed, positions: bool = False) -> list[tuple]:
    """(features (C, F), correct (C,) bool) per pronoun the engine scored whose gold entity is among its candidates;
    with `positions`, also the pronoun's token and each candidate's nearest mention's token (C,) (for experiments
    that read the text around them, docs/pipeline.md)."""
    engine.record = True
    try:
        out = engine.process_parsed(parsed)
    finally:
        engine.record = False
    pred = per_mentions(out)
    entity_of: dict[int, Counter] = {}
    for span, (char, kind) in align(pred, doc.mentions).items():
        if kind == "PROP" and span in doc.mentions:
            entity_of.setdefault(char, Counter())[doc.mentions[span][0]] += 1
    char_entity = {c: n.most_common(1)[0][0] for c, n in entity_of.items()}
    rows = []
    for i, cands, where in out.decisions or []:
        gold = doc.mentions.get((i, i))
        if gold is None or gold[1] != "PRON" or len(cands) < 2:
            continue
        chars = sorted(cands)
        correct = np.array([char_entity.get(c) == gold[0] for c in chars])
        if correct.any():
            rows.append((np.array([cands[c] for c in chars], dtype=float), correct)
                        + ((i, [where[c] for c in chars]) if positions else ()))
    return rows


def loss_and_grad(w: np.ndarray, data, w0: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """Mean negative log-likelihood of the correct candidates (softmax over each pronoun's candidates) + l2 |w-w0|^2."""
    total, grad = 0.0, np.zeros_like(w)
    for x, ok in data:  # x (C, F), ok (C,)
        s = x @ w  # (C,)
        p = np.exp(s - s.max())
        p /= p.sum()
        q = p * ok / max(p[ok].sum(), 1e-12)  # posterior over the correct ones
        total -= np.log(max(p[ok].sum(), 1e-12))
        grad += x.T @ (p - q)
    n = max(1, len(data))
    return total / n + l2 * float(((w - w0) ** 2).sum()), grad / n + 2 * l2 * (w - w0)


def fit(data, start: Weights | None = None, l2: float = 0.01, steps: int = 500, lr: float = 0.05) -> tuple[Weights, list]:
    """Weights maximising the correct candidates' likelihood (Adam, full batch); returns them and the losses."""
    start = start or Weights()
    w0 = np.array(start.vector(), dtype=float)
    w, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    losses = []
    for t in range(1, steps + 1):
        loss, g = loss_and_grad(w, data, w0, l2)
        losses.append(loss)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return replace(start, **{k: float(x) for k, x in zip(FEATURES, w)}), losses


def cross_validated_predictions(engine, docs, parsed, folds: int = 5) -> tuple[list, dict]:
    """Each document's predicted mentions, resolved with weights learned on the other folds' documents."""
    engine.weights = Weights()
    data = [instances(d, engine, p) for d, p in zip(docs, parsed)]
    preds: list = [None] * len(docs)
    learned = []
    for held in doc_folds(len(docs), folds):
        train = [x for j in range(len(docs)) if j not in held for x in data[j]]
        weights, _ = fit(train)
        learned.append(asdict(weights))
        engine.weights = weights
        for j in held:
            preds[j] = predicted(engine, parsed[j])
    engine.weights = Weights()
    return preds, {"resolver": f"learned ({folds}-fold cross-validated by document)", "fold_weights": learned,
                   "pronouns_learned_from": sum(len(d) for d in data)}


def train(folder: Path, out: Path = WEIGHTS_FILE, max_docs: int | None = None) -> dict:
    """Learn the weights on every LitBank document -> out (JSON with the weights, what they came from, attribution)."""
    docs = load_litbank(folder, max_docs)
    engine = SpacyEngine()  # (the hand-set weights: the decisions are the rules')
    data = [x for d, p in zip(docs, parse_docs(engine, docs)) for x in instances(d, engine, p)]
    if not data:
        raise ValueError(f"no resolvable gold pronouns in {folder}: is it LitBank's coref folder?")
    weights, losses = fit(data)
    record = {"weights": asdict(weights), "documents": len(docs), "pronouns": len(data),
              "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4), "attribution": ATTRIBUTION}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(record, indent=1))
    return record


def learned_weights(path: Path = WEIGHTS_FILE) -> Weights | None:
    """The shipped learned weights, or None when there are none."""
    if not Path(path).is_file():
        return None
    return Weights(**read_json(path, "reinstall whoqa, or learn them again with `whoqa train-coref --litbank DIR`", dict)["weights"])
