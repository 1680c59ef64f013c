"""Issue 79's fitted person rule, with and without the 1.5B's judgement as one of its features, on the readers' ten
novels: fitted on the fit half only (split.tsv), its threshold chosen by leaving one fit-half novel out at a time,
reported on the check half.

Each arm drops cast members (representatives, most mentioned first, as the cast shows them) whose fitted probability
of being a person falls below the threshold, and the next ones move up into the 40 shown; scored as `whoqa eval-cast
--labels` scores the cast (people among the 40 most mentioned; same-person pairs merged, a pair lost when its person is
dropped). Features: `whoqa.ranker.person.FEATURES` of the representative's cluster, and for the LLM arm the logit of
P(Yes) from `llm_person.py` (asked of the representatives of the first 60; a member it did not ask gets the fit half's
mean).

    python docs/experiments/cast-and-formats/llm_person.py --workspace ws-readers --gguf MODEL.gguf \
        --reuse docs/experiments/cast-and-formats/llm_person_1.5b.json --out docs/experiments/cast-and-formats/llm_person_1.5b_10.json
    python docs/experiments/cast-and-formats/person_fit.py --workspace ws-readers --out docs/experiments/cast-and-formats/person_fit.json
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from whoqa.core.book import Book
from whoqa.evaluation.cast import TOP_CAST, load_labels, most_mentioned
from whoqa.evaluation.readers import load_split
from whoqa.ranker.cast import _Usage, cast_of, person_features, proper_mentions
from whoqa.ranker.person import FEATURES, fit_logistic
from whoqa.service import Service

THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9)
DEPTH = 60
LABEL = {True: "person", False: "not", None: "?"}


def member_rows(book: Book, b: str, labels: dict, asked: dict) -> list[dict]:
    """The cast's first DEPTH representatives: features, P(Yes) logit (None where not asked), label."""
    cast = cast_of(book, fit=None)
    usage, proper = _Usage.of(book), proper_mentions(book)
    rows = []
    for r in most_mentioned(book)[:DEPTH]:
        f = person_features(book, r, usage, proper)
        p = asked.get((b, r))
        f["llm"] = None if p is None else math.log(max(p, 1e-6) / max(1 - p, 1e-6)) / 5
        rows.append({"book": b, "rep": r, "name": cast.names[r], "members": cast.groups[r], "features": f,
                     "label": labels[r][0] if r in labels else None})
    return rows


def fit(rows: list[dict], keys: tuple[str, ...], l2: float, fill: float) -> tuple[np.ndarray, float]:
    ex = [r for r in rows if r["label"] is not None]
    x = np.array([[r["features"][k] if r["features"][k] is not None else fill for k in keys] for r in ex])
    return fit_logistic(x, np.array([float(r["label"]) for r in ex]), l2)


def prob(r: dict, keys, w, b, fill) -> float:
    z = b + sum(wi * (r["features"][k] if r["features"][k] is not None else fill) for k, wi in zip(keys, w))
    return 1 / (1 + math.exp(-z))


def score(books: dict, labels: dict, keep) -> dict:
    """The 40 shown after dropping those `keep` refuses, against the labels; merges kept."""
    judged = people = same = merged = dropped_people = 0
    for b, rows in books.items():
        lab = labels[b]
        shown = [r for r in rows if keep(r)][:TOP_CAST]
        gone = {r["rep"] for r in rows if not keep(r)}
        judged += sum(r["label"] is not None for r in shown)
        people += sum(bool(r["label"]) for r in shown)
        dropped_people += sum(r["label"] is True for r in rows[:TOP_CAST] if r["rep"] in gone)
        rep_of = {m: r["rep"] for r in rows for m in r["members"]}
        pairs = [(x, y) for x in lab for y in lab if x < y and lab[x][0] and lab[y][0] and lab[x][1] == lab[y][1]]
        same += len(pairs)
        merged += sum(1 for x, y in pairs if rep_of.get(x) is not None and rep_of.get(x) == rep_of.get(y)
                      and rep_of[x] not in gone)
    return {"judged": judged, "people": people, "precision": round(100 * people / max(judged, 1), 2),
            "merged": merged, "same_pairs": same, "merged_share": round(100 * merged / max(same, 1), 2),
            "labelled_people_dropped_from_40": dropped_people}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--labels", type=Path, default=Path("data_prep/readers/cast_labels.tsv"))
    ap.add_argument("--books", type=Path, default=Path("../shared/data/books-unlabeled"))
    ap.add_argument("--asked", type=Path, default=Path("docs/experiments/cast-and-formats/llm_person_1.5b_10.json"))
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    labels = load_labels(a.labels)
    split = load_split(a.labels.with_name("split.tsv"))
    asked = {(r["book"], r["rep"]): r["p_yes"] for r in json.loads(a.asked.read_text())["asked"]}
    svc = Service(a.workspace)
    books = {}
    for b in labels:
        wid = svc.resolve(a.books / f"{b}.txt")
        books[b] = member_rows(Book.load(svc.ws.books / wid, wid), b, labels[b], asked)
    halves = {h: [b for b in books if split.get(b) == h] for h in ("fit", "check")}
    arms = {"rules alone": None, "fitted rule": FEATURES, "fitted rule + the 1.5B's P(Yes)": FEATURES + ("llm",),
            "the 1.5B's P(Yes) alone": ("llm",)}
    report = {}
    for arm, keys in arms.items():
        if keys is None:
            report[arm] = {h: score({b: books[b] for b in bs}, labels, lambda r: True) for h, bs in halves.items()}
            continue
        fit_rows = [r for b in halves["fit"] for r in books[b]]
        fill = float(np.mean([r["features"]["llm"] for r in fit_rows if r["features"]["llm"] is not None]))
        alone = score({b: books[b] for b in halves["fit"]}, labels, lambda r: True)
        lobo = {}
        for t in THRESHOLDS:
            per = {}
            for left in halves["fit"]:
                w, bias = fit([r for b in halves["fit"] if b != left for r in books[b]], keys, a.l2, fill)
                per[left] = [dict(r, keep=prob(r, keys, w, bias, fill) >= t) for r in books[left]]
            lobo[t] = score(per, labels, lambda r: r["keep"])
        ok = [t for t in THRESHOLDS if lobo[t]["merged_share"] >= alone["merged_share"]]
        best = max(ok, key=lambda t: (lobo[t]["precision"], -t))
        w, bias = fit(fit_rows, keys, a.l2, fill)
        keep = lambda r: prob(r, keys, w, bias, fill) >= best  # noqa: E731
        report[arm] = {"threshold": best, "weights": dict(zip(keys, map(float, w))), "bias": bias,
                       "threshold_by_leaving_one_fit_novel_out": {str(t): v for t, v in lobo.items()},
                       **{h: score({b: books[b] for b in bs}, labels, keep) for h, bs in halves.items()},
                       "check_dropped": sorted(f"{r['name']} ({LABEL[r['label']]})" for b in halves["check"]
                                               for r in books[b][:TOP_CAST] if not keep(r))}
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    for arm, v in report.items():
        print(f"{arm:<34} t={v.get('threshold', '-')!s:<5} fit {v['fit']['precision']:6.2f}% people "
              f"{v['fit']['merged_share']:6.2f}% merged | check {v['check']['precision']:6.2f}% people "
              f"{v['check']['merged_share']:6.2f}% merged, "
              f"{v['check']['labelled_people_dropped_from_40']} people dropped")


if __name__ == "__main__":
    main()
