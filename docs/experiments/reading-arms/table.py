"""The reading arms scored beside what `eval --data` served for the same questions (its per-question cache in the
target's served/, read, not redone): right answers shown (an accepted answer's content words in it:
`whoqa.evaluation.readers.other_right`), wrong ones shown, not found, right ones withheld, and the text metrics
(ROUGE-L, METEOR, BLEU-1) of the written answers (withheld ones counted as written), of those shown and of those
withheld. Only the questions every arm answered are scored, so the arms share their denominator.

    python docs/experiments/reading-arms/table.py --target WS/eval-data/unseen \
        --quote docs/experiments/reading-arms/quote_unseen_first10.jsonl.gz \
        --order docs/experiments/reading-arms/order_rank_unseen_first10.jsonl.gz \
        --out docs/experiments/reading-arms/table_unseen_first10.json
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from pathlib import Path

from whoqa.core.metrics import normalize_text, paired_book_bootstrap, rouge_l, text_metrics
from whoqa.evaluation.readers import other_right
from whoqa.llm.grounding import GroundingConfig


def read_gz(path: Path | None) -> list[dict]:
    return [json.loads(line) for line in gzip.open(path, "rt")] if path and path.is_file() else []


def served_rows(target: Path) -> dict:
    """What `eval --data` served (its per-question cache): question id -> row."""
    rows = {}
    for f in sorted((target / "served").glob("other-*.jsonl")):
        for line in f.open():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:  # (a line cut by an interruption)
                continue
            rows[r["question_id"]] = r
    return rows


def scores(name: str, items: list[tuple[str | None, bool, list[str]]]) -> dict:
    """items: (written answer, shown, accepted answers) per question."""
    shown = [(a, refs) for a, s, refs in items if s]
    held = [(a, refs) for a, s, refs in items if not s]
    tm = lambda xs: text_metrics([a or "" for a, _ in xs], [r for _, r in xs]) if xs else {"n": 0}  # noqa: E731
    return {"arm": name, "questions": len(items), "shown": len(shown),
            "right_shown": sum(other_right(a, r) for a, r in shown),
            "wrong_shown": sum(not other_right(a, r) for a, r in shown),
            "not_found": len(held), "not_found_pct": round(100 * len(held) / len(items), 1) if items else 0.0,
            "right_withheld": sum(other_right(a, r) for a, r in held),
            "written": tm([(a, r) for a, _, r in items]), "shown_text": tm(shown), "withheld_text": tm(held)}


def served_item(r: dict, refs: list[str]) -> tuple[str | None, bool, list[str]]:
    """An `eval --data` row as (written answer, shown, refs): a withheld answer is what the reader wrote."""
    return (r["answer"] if r["found"] else r.get("withheld")), bool(r["found"]), refs


def against_served(name: str, items: list, base: list, books: list[str]) -> dict:
    """The arm's written answers' ROUGE-L minus the served ones', per question, resampled by book (95% interval)."""
    def per(xs):
        return [[100 * rouge_l(normalize_text(a or ""), [normalize_text(r) for r in refs])] for a, _, refs in xs]
    return paired_book_bootstrap(per(items), per(base), books, ("rouge_l",))["difference"]["rouge_l"]


def table(served: dict, quote: list[dict], order: list[dict]) -> list[dict]:
    refs = {r["question_id"]: r["answers"] for r in quote}
    arms = {"quote": {r["question_id"]: r for r in quote if not r.get("refused")},
            "rank order": {r["question_id"]: r for r in order}}
    ids = [i for i in served if all(i in rows for rows in arms.values() if rows) and i in refs]
    thr = GroundingConfig().threshold
    base = [served_item(served[i], refs[i]) for i in ids]
    arms_items = {"served (book order; grounding rule, second look)": base}
    if arms["quote"]:
        q = arms["quote"]
        arms_items["quote"] = [(q[i]["answer"], q[i]["sentence"] is not None and bool(q[i]["answer"]), refs[i])
                               for i in ids]
        arms_items["quote+support"] = [(q[i]["answer"], q[i]["sentence"] is not None
                                        and q[i]["support_in_sentence"] >= thr, refs[i]) for i in ids]
    if arms["rank order"]:
        arms_items["rank order (grounding rule, second look)"] = [served_item(arms["rank order"][i], refs[i])
                                                                  for i in ids]
    books = [served[i]["book"] for i in ids]
    out = []
    for name, items in arms_items.items():
        row = scores(name, items)
        if items is not base:
            row["written_rouge_l_minus_served"] = against_served(name, items, base, books)
        out.append(row)
    return out


def markdown(rows: list[dict]) -> str:
    f = lambda t, k: f"{t[k]:.2f}" if t.get("n") else "-"  # noqa: E731
    diff = lambda d: f"{d['mean']:+.2f} ({d['ci95'][0]:+.2f} to {d['ci95'][1]:+.2f})" if d else ""  # noqa: E731
    lines = ["| arm | right shown | wrong shown | not found | right withheld | written ROUGE-L | METEOR | shown "
             "ROUGE-L | withheld ROUGE-L | written ROUGE-L minus served (by book) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['arm']} | {r['right_shown']} | {r['wrong_shown']} | {r['not_found']} "
                     f"({r['not_found_pct']}%) | {r['right_withheld']} | {f(r['written'], 'rouge_l')} | "
                     f"{f(r['written'], 'meteor')} | {f(r['shown_text'], 'rouge_l')} | "
                     f"{f(r['withheld_text'], 'rouge_l')} | {diff(r.get('written_rouge_l_minus_served'))} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=Path, required=True, help="the prepared books `eval --data` served")
    ap.add_argument("--quote", type=Path)
    ap.add_argument("--order", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows = table(served_rows(a.target), read_gz(a.quote), read_gz(a.order))
    print(markdown(rows))
    if a.out:
        files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (a.quote, a.order) if p and p.is_file()}
        a.out.write_text(json.dumps({"files": files, "arms": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
