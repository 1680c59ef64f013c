"""How much a change of the pronoun resolver moves what the Who stages read (issue 32, part 4).

Two workspaces prepared from the same books by two resolvers (`whoqa prepare --coref-weights FILE` for one; the
hand-set rules for the other), compared book by book on their .entities files: how many PER pronouns each links to a
named character, and how many of the pronouns both found go to another character. (Character ids are numbered by
mention count in each workspace, so they are compared through the character's most frequent name.) Where both hold a
`whoqa rerank --candidates features` run, their P@1 on the questions both Who sets hold is compared, paired, with a
bootstrap over books.

    python docs/experiments/coref_downstream.py WS_RULES WS_OTHER [--books ID ...]
"""
from __future__ import annotations

import argparse
import csv
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

RERANK = "runs/features+by-book/rerank@qwen2.5-coder-0.5b+k5+features/summary.json"


def read_entities(path: Path) -> tuple[dict[tuple[int, int], str], int]:
    """(pronoun span -> its character's most frequent name, or "" for no named character; named mentions)."""
    rows = list(csv.DictReader(path.open(encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE))
    names: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        if r["cat"] == "PER" and r["prop"] == "PROP":
            names[r["COREF"]][r["text"]] += 1
    label = {c: n.most_common(1)[0][0] for c, n in names.items()}
    pron = {(int(r["start_token"]), int(r["end_token"])): label.get(r["COREF"], "")
            for r in rows if r["cat"] == "PER" and r["prop"] == "PRON"}
    return pron, sum(sum(n.values()) for n in names.values())


def compare(ws_a: Path, ws_b: Path, books: list[str]) -> dict:
    out = Counter()
    for b in books:
        a, _ = read_entities(ws_a / "books" / b / f"{b}.entities")
        o, _ = read_entities(ws_b / "books" / b / f"{b}.entities")
        out["books"] += 1
        out["pronouns_a"] += len(a)
        out["named_a"] += sum(1 for v in a.values() if v)
        out["named_b"] += sum(1 for v in o.values() if v)
        both = a.keys() & o.keys()
        out["pronouns_both"] += len(both)
        out["changed"] += sum(1 for s in both if a[s] != o[s])
    return dict(out)


def top1(ws: Path) -> dict[int, tuple[str, bool]] | None:
    """question id -> (book, the feature ranker's first answer is right), or None without a run."""
    path = ws / RERANK
    if not path.is_file():
        return None
    questions = {q["question_id"]: q for q in json.loads((ws / "who" / "who_questions.json").read_text())}
    rankings = json.loads(path.read_text())["rankings"]
    return {int(q): (questions[int(q)]["document_id"], bool(r) and r[0] in questions[int(q)]["answers"])
            for q, r in rankings.items()}


def paired_p1(a: dict, b: dict, samples: int = 2000, seed: int = 0) -> dict:
    """P@1 of a minus b on the questions both hold: the difference, its 95% bootstrap interval over books."""
    common = sorted(a.keys() & b.keys())
    books = sorted({a[q][0] for q in common})
    diff = {bk: np.array([float(a[q][1]) - float(b[q][1]) for q in common if a[q][0] == bk]) for bk in books}
    rng = np.random.default_rng(seed)
    boot = [np.concatenate([diff[books[i]] for i in rng.integers(0, len(books), len(books))]).mean()
            for _ in range(samples)]
    every = np.concatenate(list(diff.values()))
    return {"questions": len(common), "books": len(books), "difference": 100 * every.mean(),
            "ci95": (100 * np.percentile(boot, 2.5), 100 * np.percentile(boot, 97.5)),
            "differ_at_1": int((every != 0).sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ws_a", type=Path)
    ap.add_argument("ws_b", type=Path)
    ap.add_argument("--books", nargs="*")
    args = ap.parse_args()
    books = args.books or sorted(p.name for p in (args.ws_b / "books").iterdir() if p.is_dir())
    r = compare(args.ws_a, args.ws_b, books)
    print(f"{r['books']} books, {r['pronouns_a']:,} PER pronouns in {args.ws_a.name}: linked to a named character "
          f"{100 * r['named_a'] / r['pronouns_a']:.1f}% there, {100 * r['named_b'] / r['pronouns_a']:.1f}% in "
          f"{args.ws_b.name}; {100 * r['changed'] / max(r['pronouns_both'], 1):.1f}% of the pronouns both hold go to "
          f"another character")
    ra, rb = top1(args.ws_a), top1(args.ws_b)
    if ra and rb:
        p = paired_p1(ra, rb)
        print(f"feature ranker P@1, {args.ws_a.name} minus {args.ws_b.name}, on the {p['questions']} questions both hold: "
              f"{p['difference']:+.2f} (95% {p['ci95'][0]:+.2f} to {p['ci95'][1]:+.2f}, bootstrap over {p['books']} "
              f"books); {p['differ_at_1']} questions differ at rank 1")


if __name__ == "__main__":
    main()
