"""Mou et al. (2021) Table 2 on the shared books: answer coverage of the top 5 of BM25F's 32 windows, for BM25F and
for the cross-encoder re-ranker trained by distant supervision (DS), by ICT pretraining, and by both
(whoqa/retrieval/passage_ranker.py), DS by book-level folds (no book ranked by a model that saw its questions).

    python docs/experiments/trained-ranker/coverage.py --workspace WS --workspace WS/eval-data/unseen \
        --part candidates|ict|ds|ds+ict|ict-only|arc|table [--epochs N --lr X] [--arc-k K] [--folds 3] [--out DIR]

Each part is resumable and writes under DIR (this folder): candidates.jsonl.gz (per question: its 32 windows, each
window's best-span ROUGE-L and exact-match against the answers, the DS lists), scores-ARM.jsonl.gz (per question: the
arm's order of the 32), coverage.json (the table). Models go to DIR/models (not kept in git).
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from whoqa.core.book import Book, window_text
from whoqa.core.folds import book_folds
from whoqa.core.metrics import normalize_text, paired_book_bootstrap
from whoqa.core.store import load_questions
from whoqa.core.workspace import Workspace
from whoqa.retrieval.bm25f import Window
from whoqa.retrieval.openbook import open_book
from whoqa.retrieval.passage_ranker import (BookPMI, PassageRankerConfig, answer_rouge, book_counts, candidate_windows,
                                            content_words, ds_lists, ict_lists, passages, train_lists)

TOP = 5


def read_gz(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def append_gz(path: Path, rows: list[dict]) -> None:
    with gzip.open(path, "at") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def contains(text: str, answers: list[str]) -> bool:
    t = f" {normalize_text(text)} "
    return any(normalize_text(a) and f" {normalize_text(a)} " in t for a in answers)


def books_of(workspaces: list[str]) -> dict[str, Path]:
    """book id -> the workspace holding it (prepared), for every book with questions."""
    out = {}
    for w in workspaces:
        ws = Workspace(w)
        for b in load_questions(ws):
            if (ws.books / b).is_dir():
                out.setdefault(b, Path(w))
    return dict(sorted(out.items()))


def part_candidates(a, cfg: PassageRankerConfig, out: Path) -> None:
    path = out / "candidates.jsonl.gz"
    done = {r["book"] for r in read_gz(path)}
    for b, w in books_of(a.workspace).items():
        if b in done:
            continue
        t0 = time.perf_counter()
        ob = open_book(w, b)
        rows = []
        for q in load_questions(Workspace(w))[b]:
            answers = [q["answer1"], q["answer2"]]
            wins = candidate_windows(ob, q["question"], cfg)
            cache: dict = {}
            rows.append({"book": b, "question_id": q["question_id"], "question": q["question"], "answers": answers,
                         "windows": [[x.first, x.last] for x in wins],
                         "rouge": [round(answer_rouge(ob.book, x, answers, cache), 4) for x in wins],
                         "em": [contains(window_text(ob.book, x.first, x.last), answers) for x in wins],
                         "ds": [list(x) for x in ds_lists(ob, q["question"], answers, cfg,
                                                          random.Random(f"{cfg.seed}:{b}:{q['question_id']}"))]})
        append_gz(path, rows)
        print(f"{b}: {len(rows)} questions, {time.perf_counter() - t0:.0f}s", flush=True)


def all_books(workspaces: list[str]) -> dict[str, Path]:
    out = {}
    for w in workspaces:
        ws = Workspace(w)
        for d in sorted(ws.books.iterdir()):
            if d.is_dir():
                out.setdefault(d.name, Path(w))
    return out


def part_ict(a, cfg: PassageRankerConfig, out: Path):
    """ICT lists from every prepared book's text (cached), then the ICT model."""
    from whoqa.retrieval.bert_ranker import CrossEncoder
    from whoqa.core.minilm import bundled_minilm
    lists_path, model = out / "ict-lists.jsonl.gz", out / "models" / "ict"
    if (model / "config.json").is_file():
        return
    books = all_books(a.workspace)
    if not lists_path.is_file():
        t0 = time.perf_counter()
        counts = {b: book_counts(Book.load(Workspace(w).books / b, b)) for b, w in books.items()}
        pmi = BookPMI(counts)
        print(f"word counts of {len(books)} books: {time.perf_counter() - t0:.0f}s", flush=True)
        rows = []
        for b, w in books.items():
            rows += [{"book": b, "q": q, "texts": t} for q, t in ict_lists(open_book(w, b), pmi, cfg,
                                                                            random.Random(f"{cfg.seed}:{b}"))]
        append_gz(lists_path, rows)
        print(f"{len(rows)} ICT lists, {time.perf_counter() - t0:.0f}s", flush=True)
    rows = read_gz(lists_path)  # (in book order: a seeded sample, so every book gives some)
    rows = random.Random(cfg.seed).sample(rows, min(a.ict_lists, len(rows)))
    ranker = CrossEncoder(bundled_minilm(""), cfg.max_length, "cpu")
    t0 = time.perf_counter()
    losses = train_lists(ranker, [(r["q"], r["texts"]) for r in rows], cfg)
    ranker.save(model)
    (out / "ict-training.json").write_text(json.dumps({"lists": len(rows), "seconds": round(time.perf_counter() - t0),
                                                       "first_loss": losses[0], "last_loss": float(np.mean(losses[-20:]))}))


def part_ds(a, cfg: PassageRankerConfig, out: Path, arm: str) -> None:
    """DS (from MiniLM, or from the ICT model) by book folds, or the ICT model alone; each fold's questions scored."""
    from whoqa.retrieval.bert_ranker import CrossEncoder
    from whoqa.core.minilm import bundled_minilm
    rows = read_gz(out / "candidates.jsonl.gz")
    path = out / f"scores-{arm}.jsonl.gz"
    done = {r["question_id"] for r in read_gz(path)}
    books = sorted({r["book"] for r in rows})
    from_ict = arm in ("ds+ict", "ict-only") or arm.startswith("ds-ict")
    base = str(out / "models" / "ict") if from_ict else bundled_minilm("")
    for k, fold in enumerate(book_folds(books, a.folds, cfg.seed)):
        test = [r for r in rows if r["book"] in fold and r["question_id"] not in done]
        if not test:
            continue
        ranker = CrossEncoder(base, cfg.max_length, "cpu")
        if arm != "ict-only":
            train = [(q, t) for r in rows if r["book"] not in fold for q, t in (r["ds"] or [])]
            t0 = time.perf_counter()
            losses = train_lists(ranker, train, cfg)
            print(f"{arm} fold {k}: {len(train)} lists, {time.perf_counter() - t0:.0f}s, loss {losses[0]:.3f} -> "
                  f"{np.mean(losses[-20:]):.3f}", flush=True)
        for b in sorted({r["book"] for r in test}):
            book = open_book(*[(w, b) for b_, w in books_of(a.workspace).items() if b_ == b][0]).book
            scored = []
            for r in (r for r in test if r["book"] == b):
                wins = [Window(x, y, 0.0) for x, y in r["windows"]]
                scores = ranker.score(r["question"], [window_text(book, w.first, w.last) for w in wins]) if wins else []
                scored.append({"book": b, "question_id": r["question_id"], "fold": k,
                               "order": [int(i) for i in np.argsort(-np.asarray(scores), kind="stable")]})
            append_gz(path, scored)
            print(f"{arm} fold {k} {b}: {len(scored)} scored", flush=True)


# a question about an arc or an ending: how someone ends, what becomes of something
ARC = re.compile(r"\b(die|dies|died|dying|death|killed|kill|kills|end|ends|ended|ending|finally|eventually|fate|"
                 r"last|happens? to|happened to|become of|becomes of|end up|ends up)\b", re.I)
ARC_WORDS = {"die", "dies", "died", "dying", "death", "killed", "kill", "kills", "end", "ends", "ended", "ending",
             "finally", "eventually", "fate", "last", "happens", "happen", "happened", "become", "becomes", "story",
             "book", "novel"}


def arc_windows(ob, question: str, cfg: PassageRankerConfig, k: int) -> list[Window]:
    """The last k passages of the book (latest first) that hold the question's characters (any mention: a pronoun the
    book resolves to them counts), or, where it names none, the most of its other content words (at least half):
    where someone ends, or what becomes of the thing it names."""
    book = ob.book
    cut = passages(len(book.sentences), cfg.width)
    named = ob.query(question).named
    if named:
        sids = {book.tokens[m.start].sentence for m in book.mentions if m.char_id in named}
        hits = sorted({s // cfg.width for s in sids}, reverse=True)
    else:
        words = set(content_words(re.findall(r"[A-Za-z']+", question))) - ARC_WORDS
        if not words:
            return []
        need = max(1, (len(words) + 1) // 2)
        hits = [p for p in range(len(cut) - 1, -1, -1)
                if len(words & {w for s in cut[p].sentences for w in content_words(book.sentence_words(s))}) >= need]
    return [cut[p] for p in hits[:k]]


def part_arc(a, cfg: PassageRankerConfig, out: Path) -> None:
    """Arc questions' top 5: their characters' (or object's) last `--arc-k` passages first, then BM25F's; every other
    question keeps BM25F's top 5. Each row holds its own top 5's EM and ROUGE-L (an arc passage may be outside the
    32)."""
    rows = read_gz(out / "candidates.jsonl.gz")
    path = out / f"scores-arc{a.arc_k}.jsonl.gz"
    done = {r["question_id"] for r in read_gz(path)}
    where = books_of(a.workspace)
    for b in sorted({r["book"] for r in rows}):
        todo = [r for r in rows if r["book"] == b and r["question_id"] not in done]
        if not todo:
            continue
        ob = open_book(where[b], b)
        scored = []
        for r in todo:
            bm = [Window(x, y, 0.0) for x, y in r["windows"]]
            arc = ARC.search(r["question"]) is not None
            extra = arc_windows(ob, r["question"], cfg, a.arc_k) if arc else []
            top = (extra + [w for w in bm if (w.first, w.last) not in {(x.first, x.last) for x in extra}])[:TOP]
            cache: dict = {}
            scored.append({"book": b, "question_id": r["question_id"], "arc": arc, "added": len(extra),
                           "top": [[w.first, w.last] for w in top],
                           "top_em": [contains(window_text(ob.book, w.first, w.last), r["answers"]) for w in top],
                           "top_rouge": [round(answer_rouge(ob.book, w, r["answers"], cache), 4) for w in top]})
        append_gz(path, scored)
        print(f"arc{a.arc_k} {b}: {len(scored)} ({sum(s['arc'] for s in scored)} arc questions)", flush=True)


def rrf(orders: list[list[int]], k: int = 60) -> list[int]:
    """Reciprocal rank fusion of orders of the same candidates (Cormack et al. 2009): ties keep the first's order."""
    score: dict[int, float] = {}
    for order in orders:
        for rank, i in enumerate(order):
            score[i] = score.get(i, 0.0) + 1.0 / (k + rank + 1)
    return sorted(score, key=lambda i: (-score[i], orders[0].index(i) if i in orders[0] else len(score)))


def part_table(a, cfg: PassageRankerConfig, out: Path) -> None:
    rows = read_gz(out / "candidates.jsonl.gz")
    arms = {"BM25F": {r["question_id"]: list(range(len(r["windows"]))) for r in rows}}
    for arm in ("ds", "ict-only", "ds+ict") + tuple(p.name[len("scores-"):-len(".jsonl.gz")]
                                                   for p in sorted(out.glob("scores-ds-*.jsonl.gz"))):
        got = {s["question_id"]: s["order"] for s in read_gz(out / f"scores-{arm}.jsonl.gz")}
        if len(got) == len(rows):
            arms[arm] = got
    for arm in [a for a in arms if a != "BM25F"]:  # each trained order fused with BM25F's by reciprocal rank (k 60)
        arms[f"{arm} + BM25F (RRF)"] = {q: rrf([list(range(len(o))), o]) for q, o in arms[arm].items()}
    table, per = {}, {}
    from whoqa.core.questions import question_kind
    who = [question_kind(r["question"]).who for r in rows]  # (the trained ranker as a Who arm: its Who questions)
    for arm, orders in arms.items():
        em = [[100.0 * any(r["em"][i] for i in orders[r["question_id"]][:TOP])] for r in rows]
        rl = [[100.0 * max([r["rouge"][i] for i in orders[r["question_id"]][:TOP]], default=0.0)] for r in rows]
        per[arm] = (em, rl)
        table[arm] = {"EM": round(float(np.mean(em)), 2), "ROUGE-L": round(float(np.mean(rl)), 2),
                      "Who questions' EM": round(float(np.mean([e[0] for e, w in zip(em, who) if w])), 2),
                      "other questions' EM": round(float(np.mean([e[0] for e, w in zip(em, who) if not w])), 2)}
    for p in sorted(out.glob("scores-arc*.jsonl.gz")):  # arms whose rows hold their own top 5's coverage
        got = {s["question_id"]: s for s in read_gz(p)}
        if len(got) != len(rows):
            continue
        arm = p.name[len("scores-"):-len(".jsonl.gz")]
        em = [[100.0 * any(got[r["question_id"]]["top_em"])] for r in rows]
        rl = [[100.0 * max(got[r["question_id"]]["top_rouge"], default=0.0)] for r in rows]
        per[arm] = (em, rl)
        arc = [i for i, r in enumerate(rows) if got[r["question_id"]]["arc"]]
        table[arm] = {"EM": round(float(np.mean(em)), 2), "ROUGE-L": round(float(np.mean(rl)), 2),
                      "arc questions": len(arc),
                      "arc questions' EM": round(float(np.mean([em[i][0] for i in arc])), 2) if arc else None,
                      "arc questions' EM, BM25F": round(float(np.mean([per["BM25F"][0][i][0] for i in arc])), 2)
                      if arc else None}
    table[f"upper bound (all {cfg.candidates})"] = {"EM": round(100 * float(np.mean([any(r["em"]) for r in rows])), 2),
                                     "ROUGE-L": round(100 * float(np.mean([max(r["rouge"], default=0) for r in rows])), 2)}
    groups = [r["book"] for r in rows]
    for arm in arms:
        if arm != "BM25F":
            table[arm]["EM minus BM25F, resampled by book"] = paired_book_bootstrap(
                per[arm][0], per["BM25F"][0], groups, ("EM",))["difference"]["EM"]
            if arm in arms:  # (its Who questions alone: the trained ranker as a Who arm)
                sub = [i for i, w in enumerate(who) if w]
                table[arm]["Who questions' EM minus BM25F, resampled by book"] = paired_book_bootstrap(
                    [per[arm][0][i] for i in sub], [per["BM25F"][0][i] for i in sub], [groups[i] for i in sub],
                    ("EM",))["difference"]["EM"]
    import hashlib
    import subprocess
    from dataclasses import asdict
    code = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=out).stdout.strip()
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("*.jsonl.gz"))}
    summary = {"questions": len(rows), "who_questions": sum(who), "books": len(set(groups)), "top": TOP, "folds": a.folds, "config": asdict(cfg),
               "code": code, "files": files, "arms": table}
    (out / "coverage.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


def part_readers(a, cfg: PassageRankerConfig, out: Path) -> None:
    """Table 2 on the readers' questions (data_prep/readers/questions.tsv, never trained on): BM25F's 32 for each in
    its novel (taken into --readers-workspace as `ask` takes a file), one DS model trained on all the shared
    questions' lists (candidates.jsonl.gz: no readers' question among them), the top 5's coverage of the accepted
    answers by half and kind, beside BM25F's and DS + BM25F (RRF)."""
    from whoqa.core.minilm import bundled_minilm
    from whoqa.evaluation.readers import load_questions as load_readers, load_split
    from whoqa.retrieval.bert_ranker import CrossEncoder
    from whoqa.service import Service
    qs, split = load_readers(a.readers), load_split(Path(a.readers).with_name("split.tsv"))
    path = out / "readers-candidates.jsonl.gz"
    if not path.exists():
        svc = Service(Path(a.readers_workspace))
        rows = []
        for b in sorted({q.book for q in qs}):
            wid = svc.resolve(Path(a.readers_books) / f"{b}.txt")
            ob = open_book(Path(a.readers_workspace), wid)
            for i, q in ((i, q) for i, q in enumerate(qs) if q.book == b):
                wins = candidate_windows(ob, q.question, cfg)
                texts = [window_text(ob.book, x.first, x.last) for x in wins]
                cache: dict = {}
                rows.append({"book": b, "workspace_id": wid, "i": i, "kind": q.kind, "half": split.get(b),
                             "question": q.question, "answers": q.answers, "texts": texts,
                             "rouge": [round(answer_rouge(ob.book, x, q.answers, cache), 4) for x in wins],
                             "em": [contains(t, q.answers) for t in texts]})
            print(f"readers {b}: candidates", flush=True)
        append_gz(path, rows)
    rows = read_gz(path)
    scores = out / "readers-scores-ds.jsonl.gz"
    if not scores.exists():
        lists = [(q, t) for r in read_gz(out / "candidates.jsonl.gz") for q, t in (r["ds"] or [])]
        ranker = CrossEncoder(bundled_minilm(""), cfg.max_length, "cpu")
        t0 = time.perf_counter()
        losses = train_lists(ranker, lists, cfg)
        print(f"readers DS: {len(lists)} lists, {time.perf_counter() - t0:.0f}s, loss {losses[0]:.3f} -> "
              f"{np.mean(losses[-20:]):.3f}", flush=True)
        append_gz(scores, [{"i": r["i"], "order": [int(j) for j in np.argsort(
            -np.asarray(ranker.score(r["question"], r["texts"]) if r["texts"] else []), kind="stable")]}
            for r in rows])
    order = {s["i"]: s["order"] for s in read_gz(scores)}
    arms = {"BM25F": {r["i"]: list(range(len(r["texts"]))) for r in rows}, "DS": order}
    arms["DS + BM25F (RRF)"] = {i: rrf([list(range(len(o))), o]) for i, o in order.items()}
    table = {}
    for arm, orders in arms.items():
        for group, keep in [("all", lambda r: True), ("check", lambda r: r["half"] == "check"),
                            ("check, Who", lambda r: r["half"] == "check" and r["kind"] == "who"),
                            ("check, other", lambda r: r["half"] == "check" and r["kind"] == "other"),
                            ("fit", lambda r: r["half"] == "fit")]:
            sel = [r for r in rows if keep(r)]
            table.setdefault(arm, {})[group] = {
                "questions": len(sel),
                "EM": round(100 * float(np.mean([any(r["em"][j] for j in orders[r["i"]][:TOP]) for r in sel])), 2),
                "ROUGE-L": round(100 * float(np.mean([max([r["rouge"][j] for j in orders[r["i"]][:TOP]], default=0)
                                                     for r in sel])), 2)}
    import hashlib
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (path, scores)}
    (out / "readers-coverage.json").write_text(json.dumps({"top": TOP, "files": files, "arms": table}, indent=1) + "\n")
    print(json.dumps(table, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", action="append", required=True)
    ap.add_argument("--part", required=True, choices=("candidates", "ict", "ds", "ds+ict", "ict-only", "arc", "table",
                                                         "readers"))
    ap.add_argument("--readers", default="data_prep/readers/questions.tsv", help="--part readers: the questions")
    ap.add_argument("--readers-workspace", default="ws-readers", help="--part readers: where the novels are taken in")
    ap.add_argument("--readers-books", default="../shared/data/books-unlabeled", help="--part readers: the novels")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--ict-lists", type=int, default=3000)
    ap.add_argument("--arc-k", type=int, default=2, help="--part arc: the last passages of the question's people")
    ap.add_argument("--epochs", type=int, help="DS arms: epochs (a run with another setting is its own arm, ds-eN-lrX)")
    ap.add_argument("--lr", type=float, help="DS arms: learning rate")
    ap.add_argument("--candidates", type=int, help="BM25F's windows re-ranked (default the config's 32; a larger pool "
                                                   "goes to its own --out folder: its candidates, DS lists and arms)")
    ap.add_argument("--out", default=str(Path(__file__).parent))
    a = ap.parse_args()
    out, cfg = Path(a.out), PassageRankerConfig()
    if a.candidates:
        cfg = replace(cfg, candidates=a.candidates)
    arm = a.part
    if a.part in ("ds", "ds+ict") and (a.epochs or a.lr):  # another recipe: its own arm and file
        cfg = replace(cfg, epochs=a.epochs or cfg.epochs, lr=a.lr or cfg.lr)
        arm = f"{a.part.replace('+', '-')}-e{cfg.epochs}-lr{cfg.lr:g}"
    out.mkdir(parents=True, exist_ok=True)
    if a.part == "candidates":
        part_candidates(a, cfg, out)
    elif a.part == "ict":
        part_ict(a, cfg, out)
    elif a.part == "arc":
        part_arc(a, cfg, out)
    elif a.part == "table":
        part_table(a, cfg, out)
    elif a.part == "readers":
        part_readers(a, cfg, out)
    else:
        part_ds(a, cfg, out, arm)


if __name__ == "__main__":
    main()
