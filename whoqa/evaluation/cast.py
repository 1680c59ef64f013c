"""`whoqa eval-cast`: a book's cast against LitBank's gold people.

Each LitBank document is parsed and processed by the offline engine as a book is; its characters (what `prepare`
makes: name clusters seen at least twice) and its cast (`whoqa.ranker.cast`: the people among them, merged) are
scored against the gold entities of type PER that have a proper name:
- precision: the share of predicted characters whose proper-name mentions lie mostly on gold PER mentions of any kind
  (a gold span equal to the mention, or holding it and ending on the same token: "Holmes" in "Mr. Holmes");
- recall: the share of gold named PER entities that some predicted character has a proper-name mention of.
"""
from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from data_prep.litbank import processed_docs
from whoqa.core.book import Book, write_book_files
from whoqa.evaluation.readers import load_split
from whoqa.ranker.cast import Cast, cast_of


def _gold_entity(span: tuple[int, int], people: dict, words: list[str] | None = None) -> str | None:
    """The gold PER entity a predicted name span lies on: equal; ending on the same token, one holding the other
    (a noun phrase "the Mr. Holmes" around "Holmes", or a title LitBank left out: "Prince Prospero" around its
    "Prospero"); or beginning it before a comma (an apposition: "James Mortimer" in "James Mortimer, M.R.C.S., of
    Grimpen")."""
    if span in people:
        return people[span]
    apposition = words is not None and span[1] + 1 < len(words) and words[span[1] + 1] == ","
    for (s, e), entity in people.items():
        if e == span[1] or apposition and s == span[0] and e > span[1]:
            return entity
    return None


def score_document(book: Book, gold: dict, people: dict) -> dict:
    """Counts for one document: predicted characters and cast members that are gold people (`people`: every gold
    PER mention -> entity), gold named people (`gold`: PER names and pronouns -> (entity, PROP|PRON)) found."""
    named = {ent for ent, prop in gold.values() if prop == "PROP"}
    words = [t.word for t in book.tokens]
    entity_of: dict[int, Counter] = {}
    for m in book.mentions:
        if m.prop == "PROP":
            entity_of.setdefault(m.char_id, Counter())[_gold_entity((m.start, m.end), people, words)] += 1
    cast = cast_of(book)

    def is_person(ids: list[int]) -> bool:
        c = sum((entity_of.get(i, Counter()) for i in ids), Counter())
        return sum(v for k, v in c.items() if k is not None) > sum(v for k, v in c.items() if k is None)

    def found(groups: list[list[int]]) -> set[str]:
        return {k for ids in groups for i in ids for k in entity_of.get(i, Counter()) if k is not None} & named
    chars = [[c] for c in book.characters]
    people = list(cast.groups.values())
    return {"characters": len(chars), "characters_people": sum(is_person(g) for g in chars),
            "cast": len(people), "cast_people": sum(is_person(g) for g in people), "gold_people": len(named),
            "found_by_characters": len(found(chars)), "found_by_cast": len(found(people)),
            "dropped": {book.characters[c].name: why for c, why in cast.dropped.items()},
            "dropped_people": sorted(book.characters[c].name for c in cast.dropped if is_person([c])),
            "kept_not_people": sorted(cast.names[r] for r, g in cast.groups.items() if not is_person(g))}


def evaluate_cast(folder: Path, max_docs: int | None = None, progress: bool = True) -> dict:
    """Precision and recall of the characters and of the cast over LitBank's documents (micro-averaged)."""
    docs, outputs = processed_docs(folder, max_docs, progress)
    per_doc = {}
    with tempfile.TemporaryDirectory() as tmp:
        for doc, out in outputs:
            d = Path(tmp) / doc.name
            d.mkdir()
            write_book_files(d, "doc", out.token_rows, out.entity_rows, out.book)
            per_doc[doc.name] = score_document(Book.load(d, "doc"), doc.mentions, doc.people)
    total = Counter()
    for counts in per_doc.values():
        total.update({k: v for k, v in counts.items() if isinstance(v, int)})

    def pct(a, b):
        return round(100 * total[a] / total[b], 2) if total[b] else 0.0
    return {"documents": len(docs),
            "characters": {"predicted": total["characters"], "precision": pct("characters_people", "characters"),
                           "recall": pct("found_by_characters", "gold_people")},
            "cast": {"predicted": total["cast"], "precision": pct("cast_people", "cast"),
                     "recall": pct("found_by_cast", "gold_people")},
            "gold_people": total["gold_people"],
            "dropped": {n: d["dropped"] for n, d in per_doc.items() if d["dropped"]},
            "dropped_people": {n: d["dropped_people"] for n, d in per_doc.items() if d["dropped_people"]},
            "kept_not_people": {n: d["kept_not_people"] for n, d in per_doc.items() if d["kept_not_people"]}}


TOP_CAST = 40  # the cast's most mentioned people judged against the hand labels


def most_mentioned(book: Book, cast: Cast | None = None) -> list[int]:
    """The cast's representatives, most mentioned first (a person's mentions under all of their names)."""
    cast = cast or cast_of(book)
    mentions = {r: sum(book.characters[m].count for m in ms) for r, ms in cast.groups.items()}
    return sorted(cast.groups, key=lambda r: (-mentions[r], r))


def load_labels(path: Path) -> dict[str, dict[int, tuple[bool, str]]]:
    """Hand labels of novels' casts (data_prep/readers/cast_labels.tsv): book -> cluster id -> (a person?, who)."""
    import csv
    rows: dict[str, dict[int, tuple[bool, str]]] = {}
    with Path(path).open(encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            rows.setdefault(r["book"], {})[int(r["cluster"])] = (r["person"] == "yes", r["same"] or r["name"])
    return rows


def score_labels(book: Book, labels: dict[int, tuple[bool, str]], top: int = TOP_CAST,
                 cast: Cast | None = None) -> dict:
    """A whole novel's cast against hand labels (cluster id -> (a person?, who: one key per individual)): the share of
    its `top` most mentioned people that are people; the same-person pairs of labelled clusters it merges, and the
    pairs it merges that are two people (or a person and not one). `cast`: another cast of the book than the
    rules'."""
    cast = cast or cast_of(book)
    shown = most_mentioned(book, cast)[:top]
    judged = [r for r in shown if r in labels]
    same = [(a, b) for a in labels for b in labels if a < b and labels[a][0] and labels[b][0]
            and labels[a][1] == labels[b][1]]
    merged = [(a, b) for a, b in same if cast.of(a) is not None and cast.of(a) == cast.of(b)]
    wrong = [(a, b) for ms in cast.groups.values() for a in ms for b in ms if a < b and a in labels and b in labels
             and (labels[a][1] != labels[b][1] or not (labels[a][0] and labels[b][0]))]
    name = lambda c: book.characters[c].name  # noqa: E731
    return {"top": len(shown), "judged": len(judged), "people": sum(labels[r][0] for r in judged),
            "not_people": [cast.names[r] for r in judged if not labels[r][0]],
            "same_pairs": len(same), "merged": len(merged),
            "missed": [f"{name(a)} = {name(b)}" for a, b in same if (a, b) not in merged],
            "wrong_merges": [f"{name(a)} + {name(b)}" for a, b in wrong]}


def _labelled_novels(workspace: Path, labels: Path, books: Path) -> tuple[dict, dict[str, str], dict[str, Book]]:
    """The hand labels, their split (split.tsv beside them) and each labelled novel (BOOKS/<id>.txt, taken into
    WORKSPACE as `ask` takes a file)."""
    from whoqa.service import Service
    rows = load_labels(labels)
    svc = Service(workspace)
    loaded = {}
    for b in rows:
        wid = svc.resolve(Path(books) / f"{b}.txt")
        loaded[b] = Book.load(svc.ws.books / wid, wid)
    return rows, load_split(Path(labels).with_name("split.tsv")), loaded


def evaluate_labels(workspace: Path, labels: Path, books: Path) -> dict:
    """`whoqa eval-cast --labels`: each labelled novel scored by `score_labels`, and the totals: over all novels and
    over each half of split.tsv (the fit half chooses rules, the check half only reports)."""
    rows, split, loaded = _labelled_novels(workspace, labels, books)
    out = {b: score_labels(loaded[b], rows[b]) for b in rows}
    halves = {h: _totals({b: o for b, o in out.items() if split.get(b) == h}) for h in ("fit", "check")
              if h in split.values()}
    return {"books": out, **_totals(out), "halves": halves}


def _totals(out: dict[str, dict]) -> dict:
    """The counts of `score_labels` summed over novels, with the two shares the issue's bars read."""
    keys = ("top", "judged", "people", "same_pairs", "merged")
    total = {k: sum(o[k] for o in out.values()) for k in keys}
    return {"total": total, "precision": round(100 * total["people"] / max(total["judged"], 1), 2),
            "merged_share": round(100 * total["merged"] / max(total["same_pairs"], 1), 2),
            "wrong_merges": sum(len(o["wrong_merges"]) for o in out.values())}


THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the fitted person rule's thresholds tried


def person_examples(book: Book, labelled: dict[int, tuple[bool, str]]) -> list[tuple[dict[str, float], bool]]:
    """(features, a person?) of each labelled cluster the rules keep (the fitted rule reads only those)."""
    from whoqa.ranker.cast import _Usage, person_features, proper_mentions
    rules = cast_of(book, fit=None)
    usage, proper = _Usage.of(book), proper_mentions(book)
    return [(person_features(book, cid, usage, proper), person) for cid, (person, _) in sorted(labelled.items())
            if cid in book.characters and cid not in rules.dropped and proper.get(cid)]


def _fit(examples: list[tuple[dict[str, float], bool]], threshold: float, l2: float):
    import numpy as np
    from whoqa.ranker.person import FEATURES, PersonFit, fit_logistic
    x = np.array([[f[k] for k in FEATURES] for f, _ in examples])  # (N, F)
    y = np.array([float(p) for _, p in examples])  # (N,)
    w, b = fit_logistic(x, y, l2)
    return PersonFit({k: round(float(v), 6) for k, v in zip(FEATURES, w)}, round(b, 6), threshold)


def fit_person(workspace: Path, labels: Path, books: Path, l2: float = 1.0) -> dict:
    """`whoqa eval-cast --labels --fit-person`: the fitted person rule on the fit half of split.tsv only. Its
    threshold is chosen by leaving one fit-half novel out at a time (the share of the 40 most mentioned that are
    people, summed over the left-out novels, among the thresholds that merge as many same-person pairs as the rules
    alone; ties to the lower threshold); it is then fitted on the whole fit half, and both halves are scored by
    `score_labels` with the rules alone and with the fit (the check half only reports)."""
    import hashlib
    rows, split, loaded = _labelled_novels(workspace, labels, books)
    fit_books = [b for b in rows if split.get(b) == "fit"]
    examples = {b: person_examples(loaded[b], rows[b]) for b in rows}

    def scored(names: list[str], fit) -> dict:
        out = {}
        for b in names:
            out[b] = score_labels(loaded[b], rows[b], cast=cast_of(loaded[b], fit=fit))
        return _totals(out)
    by_threshold = {}
    for t in THRESHOLDS:
        per = {}
        for left in fit_books:
            fit = _fit([e for b in fit_books if b != left for e in examples[b]], t, l2)
            per[left] = score_labels(loaded[left], rows[left], cast=cast_of(loaded[left], fit=fit))
        by_threshold[t] = _totals(per)
    halves = {h: [b for b in rows if split.get(b) == h] for h in ("fit", "check")}
    alone = {h: scored(bs, None) for h, bs in halves.items()}
    kept = [t for t in THRESHOLDS if by_threshold[t]["merged_share"] >= alone["fit"]["merged_share"]]  # (a person
    #                          dropped costs the share nothing, since the next one moves up: it costs a merge)
    best = max(kept or THRESHOLDS[:1],
               key=lambda t: (by_threshold[t]["precision"], -by_threshold[t]["wrong_merges"], -t))
    fit = _fit([e for b in fit_books for e in examples[b]], best, l2)
    fit.fitted_on = {"labels_sha256": hashlib.sha256(Path(labels).read_bytes()).hexdigest(), "books": fit_books,
                     "examples": sum(len(examples[b]) for b in fit_books), "l2": l2}
    return {"fit": asdict(fit), "threshold_by_leaving_one_fit_novel_out": {str(t): v for t, v in by_threshold.items()},
            "rules_alone": alone,
            "with_fit": {h: scored(bs, fit) for h, bs in halves.items()}}
