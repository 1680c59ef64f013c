"""Issue 52, the span arm's next step: a chooser trained on other books' questions, instead of the LLM's likelihood
alone. Each question's candidates are span_arm.py's spans of the passages the 0.5B kept, plus the answer the 0.5B
wrote; a conditional logit (whoqa.ranker.model.fit, the Who ranker's own) over features that mean the same in every
book picks one. Trained on the right candidates (those whose ROUGE-L against a gold answer is the question's best,
where it is above 0) of the other books: leave-one-book-out over the records' books.

    .venv/bin/python docs/experiments/grounded-answers/span_chooser.py --records F.jsonl.gz [--out span_chooser.json]

Features of a candidate: the LLM's summed and mean token log-probabilities and its first token's; its length (words,
tokens); its place in the passages (first candidate 0, last 1); how much of it the 0.5B's written answer shares
(ROUGE-L between them) and whether it is that answer; the share of its words the question already has; and its form
(a prepositional phrase, a "because"/"to" clause, a number, a capitalised word) crossed with the question word."""
from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

import numpy as np

from whoqa.core.metrics import normalize_text, paired_book_bootstrap, rouge_l, text_metrics
from whoqa.ranker.model import fit

PREPS = {"in", "at", "on", "to", "from", "into", "by", "with", "near", "under", "over", "through", "inside", "behind"}
QWORDS = ("where", "why", "how many", "how", "when", "what", "which")
FORMS = ("prep", "cause", "number", "capital")


def qword(question: str) -> str:
    q = question.lower()
    return next((w for w in QWORDS if re.search(rf"\b{w}\b", q)), "other")


def form(text: str) -> list[float]:
    words = text.split()
    first = words[0].lower() if words else ""
    return [float(first in PREPS), float(first in ("because", "to", "so", "for")),
            float(bool(re.search(r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|hundred)\b", text.lower()))),
            float(any(w[:1].isupper() for w in words[1:]) or (words[:1] and words[0][:1].isupper() and
                                                              first not in PREPS))]


def features(row: dict) -> tuple[list[str], np.ndarray]:
    """(candidate texts, (C, F) features): the spans, then the written answer."""
    written = normalize_text(row["written"])
    asked = set(normalize_text(row["question"]).split())
    qw = qword(row["question"])
    cands = [(t, lps) for t, lps in row["candidates"] if lps] + [(row["written"], None)]
    n = len(cands)
    out = []
    for i, (text, lps) in enumerate(cands):
        words = normalize_text(text).split()
        lp = np.maximum(np.array(lps, dtype=float), -20.0) if lps else None
        f = [lp.sum() / 10 if lp is not None else 0.0, lp.mean() if lp is not None else 0.0,
             lp[0] if lp is not None else 0.0, float(lps is None),
             np.log1p(len(words)), np.log1p(len(lps)) if lps else 0.0,
             i / max(n - 2, 1) if lps else 0.0,
             rouge_l(" ".join(words), [written]) if lps and written else 0.0,
             len(set(words) & asked) / max(len(words), 1)]
        fm = form(text)
        f += fm + [a * b for a in fm for b in (float(qw == w) for w in QWORDS)]
        out.append(f)
    return [t for t, _ in cands], np.array(out, dtype=float)


def gold_scores(row: dict, texts: list[str]) -> np.ndarray:
    gold = [normalize_text(g) for g in row["answers"]]
    return np.array([rouge_l(normalize_text(t), gold) for t in texts])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("span_chooser.json"))
    a = ap.parse_args()
    rows = [json.loads(line) for line in gzip.open(a.records, "rt")]
    data = []
    for r in rows:
        texts, x = features(r)
        g = gold_scores(r, texts)
        data.append((r, texts, x, g))
    books = sorted({r["book"] for r in rows})
    chosen = [None] * len(rows)
    weights = []
    for b in books:
        train = [(x, (g >= g.max() - 1e-9) & (g > 0)) for r, _, x, g in data if r["book"] != b]
        mu = np.concatenate([x for x, _ in train]).mean(0)
        sd = np.concatenate([x for x, _ in train]).std(0) + 1e-6
        w = fit([(x - mu) / sd for x, _ in train], [y for _, y in train])
        weights.append((w / sd).tolist())
        for i, (r, texts, x, g) in enumerate(data):
            if r["book"] == b:
                chosen[i] = texts[int(np.argmax(((x - mu) / sd) @ w))]
    written = [r["written"] for r in rows]
    per = lambda answers: [[100 * rouge_l(normalize_text(p), [normalize_text(g) for g in r["answers"]])]
                           for r, p in zip(rows, answers)]
    m = lambda answers: {k: round(v, 2) for k, v in text_metrics(answers, [r["answers"] for r in rows]).items()
                         if k in ("rouge_l", "meteor", "bleu_1")}
    out = {"records": str(a.records), "questions": len(rows), "books": len(books),
           "written (as ask writes it)": m(written), "chooser, leave one book out": m(chosen),
           "chose the written answer, %": round(100 * np.mean([c == w for c, w in zip(chosen, written)]), 1),
           "oracle over the candidates and the written answer": round(100 * float(np.mean([g.max() for *_, g in data])), 2),
           "chooser minus written, ROUGE-L, 95% over books": paired_book_bootstrap(
               per(chosen), per(written), [r["book"] for r in rows], ["rouge_l"])["difference"]["rouge_l"],
           "mean weights over the folds (unstandardised)": np.mean(weights, 0).round(3).tolist()}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
