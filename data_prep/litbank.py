"""`whoqa eval-coref`: the offline engine against LitBank's gold coreference, on PER names and pronouns.

Our mentions live on LitBank's own tokens (we parse its pre-tokenised sentences), so a predicted mention aligns to
a gold one when the spans are equal, or when it lies inside the gold span and ends on the same token ("Holmes" in
gold "Mr. Holmes"). Unaligned predictions stay in as spurious mentions, so precision pays for them.
Scores are micro-averaged over documents: numerators and denominators are summed before dividing.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from data_prep.narrativeqa import DataError
from data_prep.parse import parse_sentences
from whoqa.core.progress import bar as progress_bar
from data_prep.engine_spacy import SpacyEngine

Span = tuple[int, int]


@dataclass
class GoldDoc:
    name: str
    sentences: list[list[str]]
    mentions: dict[Span, tuple[str, str]]  # span -> (entity, PROP|PRON), PER names and pronouns only
    chains: list[set[Span]] = field(default_factory=list)  # every gold entity's mentions, all types (for training)
    people: dict[Span, str] = field(default_factory=dict)  # every PER mention (names, nouns, pronouns) -> its entity


def load_litbank(folder: Path, max_docs: int | None = None) -> list[GoldDoc]:
    folder = Path(folder)
    if (folder / "coref").is_dir() and not any(folder.glob("*.ann")):
        folder = folder / "coref"  # LitBank's own layout: the coref annotations in coref/
    anns = sorted(folder.glob("*.ann")) if folder.is_dir() else []
    if not anns:
        raise DataError(f"no LitBank .ann files in {folder}: pass --litbank with LitBank's coref folder")
    docs = []
    for ann in anns[:max_docs]:
        txt = ann.with_suffix(".txt")
        if not txt.is_file():
            raise DataError(f"{ann} has no {txt.name} beside it")
        sentences = [line.split(" ") for line in txt.read_text(encoding="utf-8").split("\n") if line.strip()]
        offsets = np.cumsum([0] + [len(s) for s in sentences]).tolist()
        raw, entity = {}, {}
        for n, line in enumerate(ann.read_text(encoding="utf-8").splitlines(), 1):
            c = line.split("\t")
            try:
                if c[0] == "MENTION":
                    raw[c[1]] = (offsets[int(c[2])] + int(c[3]), offsets[int(c[4])] + int(c[5]), c[7], c[8])
                elif c[0] == "COREF":
                    entity[c[1]] = c[2]
            except (IndexError, ValueError) as e:
                raise DataError(f"{ann} line {n} is malformed ({e}): expected LitBank's MENTION/COREF tab-separated "
                                f"records") from None
        if not raw:
            raise DataError(f"{ann} holds no MENTION records: is it a LitBank coref .ann file?")
        mentions = {(s, e): (entity.get(mid, mid), prop) for mid, (s, e, cat, prop) in raw.items()
                    if cat == "PER" and prop in ("PROP", "PRON")}
        docs.append(GoldDoc(ann.stem, sentences, mentions, clusters({(s, e): entity.get(mid, mid)
                                                                     for mid, (s, e, _, _) in raw.items()}),
                            {(s, e): entity.get(mid, mid) for mid, (s, e, cat, _) in raw.items() if cat == "PER"}))
    return docs


def clusters(assign: dict[Span, str]) -> list[set]:
    by = defaultdict(set)
    for span, e in assign.items():
        by[e].add(span)
    return list(by.values())


def muc(key: list[set], resp: list[set]) -> tuple[float, float, float, float]:
    """(recall numerator, recall denominator, precision numerator, precision denominator)."""
    def side(a, b):
        where = {m: i for i, c in enumerate(b) for m in c}
        num = den = 0
        for c in a:
            parts = {where.get(m, ("single", m)) for m in c}
            num += len(c) - len(parts)
            den += len(c) - 1
        return num, den
    rn, rd = side(key, resp)
    pn, pd = side(resp, key)
    return rn, rd, pn, pd


def b3(key: list[set], resp: list[set]) -> tuple[float, float, float, float]:
    def side(a, b):
        where = {m: i for i, c in enumerate(b) for m in c}
        num = 0.0
        for c in a:
            counts = defaultdict(int)
            for m in c:
                if m in where:
                    counts[where[m]] += 1
            num += sum(n * n for n in counts.values()) / len(c)
        return num, sum(len(c) for c in a)
    rn, rd = side(key, resp)
    pn, pd = side(resp, key)
    return rn, rd, pn, pd


def ceafe(key: list[set], resp: list[set]) -> tuple[float, float, float, float]:
    from scipy.optimize import linear_sum_assignment
    if not key or not resp:
        return 0.0, len(key), 0.0, len(resp)
    sim = np.array([[2 * len(k & r) / (len(k) + len(r)) for r in resp] for k in key])
    rows, cols = linear_sum_assignment(-sim)
    total = float(sim[rows, cols].sum())
    return total, len(key), total, len(resp)


def f1(r_num, r_den, p_num, p_den) -> dict:
    r = r_num / r_den if r_den else 0.0
    p = p_num / p_den if p_den else 0.0
    return {"p": round(100 * p, 2), "r": round(100 * r, 2), "f1": round(100 * (2 * p * r / (p + r)) if p + r else 0.0, 2)}


def align(pred: dict[Span, tuple[int, str]], gold: dict[Span, tuple[str, str]]) -> dict[Span, tuple[int, str]]:
    """Predicted mentions renamed to the gold span they align with (unaligned ones keep their own span)."""
    by_end = defaultdict(list)
    for s, e in gold:
        by_end[e].append((s, e))
    out, used = {}, set()
    for span, v in sorted(pred.items()):
        target = span if span in gold else None
        if target is None:
            target = next((g for g in by_end.get(span[1], []) if g[0] <= span[0] and g not in used), None)
        if target is not None and target not in used:
            used.add(target)
            out[target] = v
        else:
            out[("pred",) + span] = v
    return out


def doc_counts(doc: GoldDoc, pred: dict[Span, tuple[int, str]]) -> dict[str, np.ndarray]:
    """One document's score numerators and denominators (summed over documents, then divided: micro-average)."""
    pred = align(pred, doc.mentions)
    out = {}
    key = clusters({s: e for s, (e, _) in doc.mentions.items()})
    resp = clusters({s: c for s, (c, _) in pred.items()})
    for name, fn in (("muc", muc), ("b3", b3), ("ceafe", ceafe)):
        out[name] = np.array(fn(key, resp), dtype=float)
    key_n = clusters({s: e for s, (e, p) in doc.mentions.items() if p == "PROP"})
    resp_n = clusters({s: c for s, (c, p) in pred.items() if p == "PROP"})
    out["names_b3"] = np.array(b3(key_n, resp_n), dtype=float)
    # pronoun accuracy: linked to a predicted cluster that holds a gold name of the same entity
    names_of_cluster = defaultdict(set)
    for s, (c, _) in pred.items():
        if s in doc.mentions and doc.mentions[s][1] == "PROP":
            names_of_cluster[c].add(doc.mentions[s][0])
    named_entities = {e for e, p in doc.mentions.values() if p == "PROP"}
    ok = total = named = 0
    for s, (e, p) in doc.mentions.items():
        if p != "PRON":
            continue
        total += 1
        named += e in named_entities
        ok += s in pred and e in names_of_cluster.get(pred[s][0], ())
    hits = sum(1 for s in pred if s in doc.mentions)
    out["pronouns"] = np.array([ok, total, named], dtype=float)
    out["mentions"] = np.array([hits, len(pred), len(doc.mentions)], dtype=float)
    return out


def per_mentions(out) -> dict[Span, tuple[int, str]]:
    """A processed document's PER mentions: span -> (character, PROP|PRON)."""
    return {(r[1], r[2]): (r[0], r[3]) for r in out.entity_rows if r[4] == "PER"}


def predicted(engine, parsed) -> dict[Span, tuple[int, str]]:
    """The engine's PER mentions of a parsed document."""
    return per_mentions(engine.process_parsed(parsed))


def summarize(sums: dict[str, np.ndarray], documents: int) -> dict:
    res = {name: f1(*sums[name]) for name in ("muc", "b3", "ceafe", "names_b3")}
    conll = round((res["muc"]["f1"] + res["b3"]["f1"] + res["ceafe"]["f1"]) / 3, 2)
    ok, total, named = sums["pronouns"]
    hits, pred, gold = sums["mentions"]
    return {
        "documents": documents,
        "scope": "PER entities; proper-name and pronoun mentions only",
        "conll_f1": conll, "muc": res["muc"], "b3": res["b3"], "ceafe": res["ceafe"],
        "name_clustering_b3": res["names_b3"],
        "pronoun_accuracy": round(100 * ok / total, 2) if total else 0.0,
        "pronoun_accuracy_named_entities": round(100 * ok / named, 2) if named else 0.0,
        "gold_pronouns": int(total),
        "mentions": {"gold": int(gold), "predicted": int(pred), "aligned": int(hits),
                     "recall": round(100 * hits / gold, 2) if gold else 0.0},
        "reference": "BookNLP on LitBank, all mention types: avg F1 76.4 (small), 79.0 (big)",
    }


def parse_docs(engine, docs: list[GoldDoc], progress: bool = True) -> list:
    return [parse_sentences(engine.nlp, d.sentences) for d in progress_bar(docs, desc="parse litbank", unit="doc",
                                                                          progress=progress)]


def processed_docs(folder: Path, max_docs: int | None = None, progress: bool = True):
    """(LitBank's documents, an iterator of (document, the spaCy engine's output for it)), parsed and processed one
    by one as the iterator is read: what the cast (whoqa.evaluation.cast) is judged on."""
    docs = load_litbank(folder, max_docs)
    engine = SpacyEngine()
    return docs, ((doc, engine.process_parsed(parsed)) for doc, parsed in zip(docs, parse_docs(engine, docs, progress)))


def rule_predictions(engine, docs: list[GoldDoc], parsed: list) -> tuple[list, dict]:
    """Each document's predicted mentions with the engine's own resolver weights."""
    name = getattr(engine, "resolver_name", "rules")
    return [predicted(engine, p) for p in parsed], {"resolver": "rules (hand-set weights)" if name == "rules" else name}


def evaluate(folder: Path, max_docs: int | None = None, engine=None, predictions=rule_predictions) -> dict:
    """The engine on every document. predictions(engine, docs, parsed) -> (each document's predicted mentions, what
    made them): the engine's resolver as it is, or e.g. data_prep.coref_learn.cross_validated_predictions."""
    docs = load_litbank(folder, max_docs)
    engine = engine or SpacyEngine()
    parsed = parse_docs(engine, docs)
    preds, info = predictions(engine, docs, parsed)
    counts = [doc_counts(doc, pred) for doc, pred in zip(docs, preds)]
    return {**info, **summarize(_summed(counts), len(docs)), "folds": by_fold(counts)}


def _summed(counts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    sums: dict[str, np.ndarray] = {}
    for c in counts:
        for k, v in c.items():
            sums[k] = sums.get(k, 0) + v
    return sums


def doc_folds(n: int, folds: int = 5) -> list[list[int]]:
    """Documents in folds by position (every folds-th): each document is held out exactly once."""
    return [list(range(k, n, folds)) for k in range(folds)]


FOLD_METRICS = ("conll_f1", "pronoun_accuracy", "pronoun_accuracy_named_entities")


def by_fold(counts: list[dict[str, np.ndarray]], folds: int = 5) -> dict:
    """The scores on each of the 5 document folds that `--resolver learned` holds out (the same folds for every
    resolver), and their mean and sd: how much a figure moves from one set of 10 documents to another."""
    per = [summarize(_summed([counts[j] for j in held]), len(held)) for held in doc_folds(len(counts), folds)
           if held]
    out = {"per_fold": [{m: p[m] for m in FOLD_METRICS} for p in per]}
    for m in FOLD_METRICS:
        xs = np.array([p[m] for p in per], dtype=float)
        out[m] = {"mean": round(float(xs.mean()), 2), "sd": round(float(xs.std(ddof=1)) if len(xs) > 1 else 0.0, 2)}
    return out
