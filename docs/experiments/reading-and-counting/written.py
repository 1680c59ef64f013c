"""Issue 63: the Who answer the reader writes, linked to the cast (`Service.written`, whoqa.ranker.written), question
by question, resumable (rows already in OUT are kept and not asked again).

The Who set of a workspace (the 41 shared books' 254 questions, after `whoqa prepare --data ../shared/data
--workspace ws51 --no-unlabeled --no-artificial --no-embeddings` and `whoqa index --workspace ws51`):

    .venv/bin/python docs/experiments/reading-and-counting/written.py --workspace ws51 --out docs/experiments/reading-and-counting/written_1.5b.jsonl.gz

The readers' questions (their Who rows, judged by name as `eval --questions` judges them):

    .venv/bin/python docs/experiments/reading-and-counting/written.py --workspace ws-readers \
        --questions data_prep/readers/questions.tsv --out docs/experiments/reading-and-counting/written_readers_1.5b.jsonl.gz

Each row: the question, the reader's text (shown or withheld), whom it links (cast representatives, in order), how
(by name, through a passage mention, or not at all), the right answers (as cast representatives) and whether the first
linked one is right. `--llm` names another reader (default: the one `ask` serves for other questions).
`--again-from FIRST`: the rows of FIRST, each question whose reader wrote only the question's own person asked once
more (`write_again`):

    .venv/bin/python docs/experiments/reading-and-counting/written.py --workspace ws51 --fusion pool \
        --again-from docs/experiments/reading-and-counting/written_pool_1.5b.jsonl.gz --out docs/experiments/reading-and-counting/written_pool_again_1.5b.jsonl.gz
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from whoqa.core.progress import bar
from whoqa.retrieval.bm25f import NothingMatched
from whoqa.service import Service, ServiceConfig


from whoqa.evaluation.choice_rows import done_rows, readers_items, who_set_items  # noqa: E402,F401 (one copy)


def again(svc: Service, it: dict, first: dict):
    """The second write of a question whose first written answer named only the question's own person."""
    from whoqa.ranker.written import Written
    from whoqa.service.reading import write_again
    ob = svc.open(it["book"])
    query = ob.read(it["question"])
    wins = svc.passages(ob, query)
    return write_again(svc, ob, query, wins, (Written(first["text"], named_passed=first["named_passed"]), None))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--questions", type=Path)
    ap.add_argument("--books", type=Path, default=Path("../shared/data/books-unlabeled"))
    ap.add_argument("--llm")
    ap.add_argument("--fusion", help="the passages' retrieval (PassageConfig.fusion; default: what `ask` serves "
                                     "other questions with); bm25f: BM25F alone over the question's content words "
                                     "and named characters, no sentence vectors; pool: MiniLM re-ranking BM25F's "
                                     "first hits only")
    ap.add_argument("--again-from", type=Path, help="a finished file of first written answers (same --fusion): each "
                    "row copied, except where the reader wrote only the question's own person, which is asked once "
                    "more (whoqa.service.reading.write_again), as a fit with written_again serves")
    a = ap.parse_args()
    from dataclasses import replace
    from whoqa.retrieval.passages import PassageConfig
    cfg = ServiceConfig(llm=a.llm)
    if a.fusion:
        cfg = replace(cfg, passages=replace(PassageConfig(), fusion=a.fusion))
    svc = Service(a.workspace, cfg)
    items = readers_items(svc, a.questions, a.books) if a.questions else who_set_items(a.workspace)
    have = done_rows(a.out)
    firsts = done_rows(a.again_from) if a.again_from else {}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    from whoqa.evaluation.readers import who_rank
    from whoqa.ranker.features import answer_ids
    for it in bar(items, desc="written Who answers", unit="question"):
        if it["key"] in have:
            continue
        t0 = time.perf_counter()
        first = firsts.get(it["key"])
        if first is not None and (first.get("linked") or not first.get("named_passed")):
            row = {**first, "again": False}  # (linked, or no question's person passed over: as written first)
            with gzip.open(a.out, "at", encoding="utf-8") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            have[it["key"]] = row
            continue
        try:
            if first is not None:
                w, ans = again(svc, it, first)
            else:
                w, ans = svc.written(it["book"], it["question"])
        except NothingMatched as e:
            row = {**it, "error": str(e)}
        else:
            book = svc.book(it["book"])
            names = [book.characters[r].name for r in w.linked]
            row = {**it, "text": w.text, "shown": bool(ans.answer) if ans is not None else first.get("shown"), "linked": w.linked, "linked_names": names,
                   "named_passed": w.named_passed, "how": w.how, "sentence": w.sentence,
                   "seconds": round(time.perf_counter() - t0, 3)}
            if first is not None:
                row.update(again=True, first_text=first.get("text"))
            if "answers" in it:
                right = answer_ids(book, it["answers"])
                row.update(right=right, correct=bool(w.linked) and w.linked[0] in right)
            else:
                rank = who_rank(names, it["names"])
                row.update(correct=rank == 1)
        with gzip.open(a.out, "at", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        have[it["key"]] = row
    rows = list(have.values())
    linked = [r for r in rows if r.get("linked")]
    print(f"{len(rows)} questions; written answer linked to a character: {len(linked)} "
          f"({100 * len(linked) / max(len(rows), 1):.1f}%); first linked right: {sum(r.get('correct', False) for r in rows)}"
          f" ({100 * sum(r.get('correct', False) for r in rows) / max(len(rows), 1):.2f}% of all, "
          f"{100 * sum(r.get('correct', False) for r in linked) / max(len(linked), 1):.1f}% of the linked)")


if __name__ == "__main__":
    main()
