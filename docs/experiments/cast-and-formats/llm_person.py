"""Issue 66, the next lever after the rules: a local LLM judging whether a cast member is a person, from sentences of
the book that name it. Each of the cast's most mentioned members (its representative's name; up to 3 sentences with
a proper-name mention of the member, spread over the book) is asked, in the model's chat form:

    Sentences from a novel that mention "Zulu": 1. ... 2. ... 3. ...
    In this novel, is "Zulu" the name of one person (an individual character)? Answer Yes or No.

and judged by P(Yes) against P(No) at the answer's first token. Scored against the hand labels
(data_prep/readers/cast_labels.tsv) as `whoqa eval-cast --labels` scores the cast: the share of the 40 most mentioned
that are people after dropping those the model calls no person at a threshold (the next ones move up), and the
labelled people it would drop.

    python docs/experiments/cast-and-formats/llm_person.py --workspace ws-readers --gguf MODEL.gguf --out llm_person_0.5b.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from whoqa.core.book import Book
from whoqa.evaluation.cast import TOP_CAST, load_labels, most_mentioned
from whoqa.ranker.cast import cast_of
from whoqa.service import Service

SENTENCES = 3
DEPTH = 60  # the cast members asked per book (the 40 shown, and the ones that move up when some are dropped)
THRESHOLDS = (0.5, 0.7, 0.8, 0.85, 0.875, 0.9)


def prompt(name: str, sentences: list[str]) -> str:
    listed = "\n".join(f"{i}. {s}" for i, s in enumerate(sentences, 1))
    user = (f"Sentences from a novel that mention \"{name}\":\n{listed}\n\nIn this novel, is \"{name}\" the name of "
            f"one person (an individual character)? Answer Yes or No.")
    return (f"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def member_sentences(book: Book, members: list[int], n: int = SENTENCES) -> list[str]:
    """Up to n sentences with a proper-name mention of these clusters, spread evenly over the book."""
    sids = sorted({book.tokens[m.start].sentence for m in book.mentions if m.char_id in members and m.prop == "PROP"})
    if not sids:
        return []
    picks = [sids[int(i)] for i in np.linspace(0, len(sids) - 1, min(n, len(sids)))]
    return [" ".join(book.sentence_text(s)[0].split())[:400] for s in dict.fromkeys(picks)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--gguf", type=Path, required=True)
    ap.add_argument("--labels", type=Path, default=Path("data_prep/readers/cast_labels.tsv"))
    ap.add_argument("--books", type=Path, default=Path("../shared/data/books-unlabeled"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rescore", action="store_true", help="score OUT's answers again (other thresholds), asking nothing")
    ap.add_argument("--reuse", type=Path, action="append", default=[],
                    help="an earlier OUT whose answers are taken where book, member and name are the same")
    a = ap.parse_args()
    labels = load_labels(a.labels)
    if a.rescore:
        old = json.loads(a.out.read_text())
        report(a, labels, old["asked"], old["seconds"], old["model"])
        return
    import llama_cpp
    import torch
    llm = llama_cpp.Llama(str(a.gguf), n_ctx=1024, n_threads=torch.get_num_threads(), verbose=False)
    yes, no = llm.tokenize(b"Yes", add_bos=False)[0], llm.tokenize(b"No", add_bos=False)[0]
    svc = Service(a.workspace)
    known = {(r["book"], r["rep"], r["name"]): r["p_yes"] for f in a.reuse for r in json.loads(f.read_text())["asked"]}
    rows, t0 = [], time.perf_counter()
    for b, labelled in labels.items():
        wid = svc.resolve(a.books / f"{b}.txt")
        book = Book.load(svc.ws.books / wid, wid)
        cast = cast_of(book)
        mentions = {r: sum(book.characters[m].count for m in ms) for r, ms in cast.groups.items()}
        order = most_mentioned(book)[:DEPTH]
        for rank, r in enumerate(order):
            said = member_sentences(book, cast.groups[r])
            p_yes = known.get((b, r, cast.names[r]))
            if said and (b, r, cast.names[r]) not in known:
                llm.reset()
                llm.eval(llm.tokenize(prompt(cast.names[r], said).encode(), add_bos=False, special=True))
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(llm.n_vocab(),))  # (V,)
                p_yes = float(1 / (1 + np.exp(logits[no] - logits[yes])))
            rows.append({"book": b, "rep": r, "name": cast.names[r], "rank": rank, "mentions": mentions[r],
                         "label": labelled[r][0] if r in labelled else None, "p_yes": p_yes})
        print(f"{b}: {len(order)} asked, {time.perf_counter() - t0:.0f}s", flush=True)
    report(a, labels, rows, round(time.perf_counter() - t0, 1), a.gguf.name)


def report(a, labels: dict, rows: list[dict], seconds: float, model: str) -> None:
    def score(t: float | None) -> dict:
        """The top 40 after dropping those with P(Yes) < t (None: the rules alone), against the labels."""
        people = judged = dropped_people = dropped_not = 0
        for b in labels:
            mine = [r for r in rows if r["book"] == b]
            kept = [r for r in mine if t is None or r["p_yes"] is None or r["p_yes"] >= t][:TOP_CAST]
            gone = [r for r in mine[:TOP_CAST] if t is not None and r["p_yes"] is not None and r["p_yes"] < t]
            judged += sum(r["label"] is not None for r in kept)
            people += sum(bool(r["label"]) for r in kept)
            dropped_people += sum(r["label"] is True for r in gone)
            dropped_not += sum(r["label"] is False for r in gone)
        return {"judged": judged, "people": people, "precision": round(100 * people / max(judged, 1), 2),
                "dropped_from_top_40": {"people": dropped_people, "not_people": dropped_not}}
    out = {"model": model, "seconds": seconds, "rules_alone": score(None),
           **{f"p_yes >= {t}": score(t) for t in THRESHOLDS}, "asked": rows}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "asked"}, indent=1))
    for r in rows:
        if r["label"] is not None and r["rank"] < TOP_CAST:
            print(f"{r['name']:<28} label={'person' if r['label'] else 'NOT':<7} p_yes={r['p_yes']}")


if __name__ == "__main__":
    main()
