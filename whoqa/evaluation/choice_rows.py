"""The rows a choice ranking is fit and judged on (whoqa.evaluation.choice_fit): per Who question, the reader's choice
among the people its passages mention (whoqa.ranker.reader_choice), the counts' features over the cast, the written
answer's link and the right answers, made as `ask` makes them and kept one JSON line a question (.jsonl.gz),
resumable (`whoqa choice-rows`).

Two sources of questions: a workspace's Who set (NarrativeQA's, `whoqa prepare` + `whoqa index`), whose written
answers may come from a file made earlier (`--written`), and the readers' questions (data_prep/readers/
questions.tsv: each book taken in as `ask` takes a file in; its written answers written here).
"""
from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

from whoqa.core.progress import bar
from whoqa.ranker.cast import cast_of
from whoqa.ranker.features import SERVED, answer_ids, book_features, columns
from whoqa.ranker.reader_choice import reader_choice
from whoqa.ranker.written import load_written
from whoqa.retrieval.bm25f import NothingMatched, context_sentences


def done_rows(out: Path) -> dict[str, dict]:
    """The rows a file holds already, by key (a line cut by an interruption is left out: asked again)."""
    from whoqa.core.artifacts import read_rows
    return {r["key"]: r for r in read_rows(out) if "key" in r}


def who_set_items(ws: Path, seed: int = 13) -> list[dict]:
    """The workspace's usable Who questions (book-level CV's, whoqa.ranker.train.book_fold_candidates) as items."""
    from whoqa.core.store import load_who_set
    from whoqa.ranker.train import book_fold_candidates
    _, questions = load_who_set(ws)
    by_id = {int(q["question_id"]): q for q in questions}
    return [{"key": str(c["question_id"]), "book": by_id[c["question_id"]]["document_id"],
             "question": by_id[c["question_id"]]["question"], "answers": c["answers"]}
            for c in book_fold_candidates(ws, 10, seed)]


def readers_items(svc, questions: Path, books: Path) -> list[dict]:
    """The readers' Who questions as items, each book taken in from BOOKS/<id>.txt (once)."""
    from whoqa.evaluation.readers import load_questions
    rows = [q for q in load_questions(questions) if q.kind == "who"]
    ids = {}
    for b in dict.fromkeys(q.book for q in rows):
        path = Path(books) / f"{b}.txt"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: pass --books with the folder holding the questions' books")
        ids[b] = svc.resolve(path)
    return [{"key": f"{q.book}:{q.question}", "book": ids[q.book], "question": q.question, "names": q.answers}
            for q in rows]


def _reading(svc, it: dict) -> tuple:
    """(the opened book, the question read, the served feature fit, the passages its written answers read, the reader
    that chooses, its config): what a row and its votes read, as `ask` reads it."""
    ob = svc.open(it["book"])
    query = ob.read(it["question"])
    fit = svc.models.fit(svc.models.who_llm())
    passages = svc.passages(ob, query, fit.ranker.written_passages())
    base, cfg = svc.models.choosing_llm(svc.models.routes().llm)
    return ob, query, fit, passages, svc.models.llm(base, scores=False, cfg=cfg), cfg


def choice_row(svc, it: dict, written: dict | None, also_top: int = 0) -> dict:
    """One question's row: what the served choice ranking reads, made the way `ask` makes it; `also_top`: the
    counts' first k people (the shipped feature ranker's first stage) scored too."""
    import numpy as np
    from whoqa.service.reading import written_answer
    ob, query, fit, passages, reader, cfg = _reading(svc, it)
    book = ob.book
    wins = ob.windows(query)
    ids, x = book_features(book, context_sentences(wins, len(book.sentences)), query.named, query, True,
                           used=SERVED)
    x = x[:, columns(SERVED)]  # (C, 5)
    w1 = counts_weights(fit)
    also = [ids[j] for j in np.argsort(-(x @ np.array(w1)), kind="stable")[:also_top]] if also_top else []
    t = time.perf_counter()
    choice = reader_choice(reader, ob, query, passages, svc.models.pool(who=False), cfg, also)
    seconds = time.perf_counter() - t
    t = time.perf_counter()
    if written is None:
        w, _ = written_answer(svc, ob, query, fit.ranker.written_passages(),
                              again=bool((fit.ranker.prompt or {}).get("written_again")))
        linked, text = w.linked, w.text
    else:
        linked, text = written.get(it["key"], []), None
    cast = cast_of(book)
    row = {**it, "ids": ids, "x": x.round(6).tolist(), "features": list(SERVED), "also_top": also_top,
           "passages": (fit.ranker.prompt or {}).get("written_passages"),
           "counts_weights": w1,
           "names_cast": [cast.names.get(i, book.characters[i].name) for i in ids],
           "choice": choice.to_json(), "choice_seconds": round(seconds, 3),
           "written": [cast.of(c) for c in linked if cast.of(c) is not None], "written_text": text,
           "written_seconds": round(time.perf_counter() - t, 3) if written is None else None}
    if "answers" in it:
        row["right"] = answer_ids(book, it["answers"])
    return row


def vote_row(svc, it: dict) -> dict:
    """One question's votes: the passages `choice_row` reads, each read on its own (whoqa.ranker.reader_choice.
    passage_votes), kept by the question's key beside its row."""
    from whoqa.ranker.reader_choice import passage_votes
    ob, query, _, passages, reader, cfg = _reading(svc, it)
    t = time.perf_counter()
    votes = passage_votes(reader, ob, query, passages, svc.models.pool(who=False), cfg)
    return {"key": it["key"], "votes": [v.to_json() for v in votes], "votes_seconds": round(time.perf_counter() - t, 3)}


def counts_weights(fit) -> list[float]:
    """The shipped feature ranker's first-stage weights over SERVED (what picks the counts' favourites)."""
    if list(fit.ranker.features["stage1"]) != list(SERVED):
        raise ValueError(f"the served feature ranker's first stage reads {fit.ranker.features['stage1']}, not "
                         f"{list(SERVED)}: fit it again with `whoqa rerank --candidates features --cast`")
    return [float(v) for v in fit.ranker.stage1]


def make_rows(workspace: Path, out: Path, questions: Path | None = None,
              books: Path = Path("../shared/data/books-unlabeled"), written: Path | None = None,
              progress: bool = True, also_top: int = 0, votes: bool = False, llm: str | None = None,
              limit: int | None = None, write: bool = True) -> int:
    """Every question's row appended to `out` (those it holds are kept); the number of rows it then holds. `votes`:
    each question's votes (`vote_row`) instead, for `whoqa fit-choice --nqa-votes/--readers-votes`; `llm`: the
    reader (default the one that writes answers here); `limit`: the first N questions only; `write`: the reader
    writes each question's answer too (for the arms that read it; without `written`)."""
    from whoqa.service import Service, ServiceConfig
    svc = Service(workspace, ServiceConfig(llm=llm))
    items = readers_items(svc, questions, books) if questions else who_set_items(workspace)
    items = items[:limit] if limit is not None else items
    links = load_written(written) if written else (None if write else {})
    have = done_rows(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for it in bar(items, desc="votes" if votes else "choice rows", unit="question", progress=progress):
        if it["key"] in have:
            continue
        try:
            row = vote_row(svc, it) if votes else choice_row(svc, it, links, also_top)
        except NothingMatched as e:
            row = {**it, "error": str(e)}
        with gzip.open(out, "at", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        have[it["key"]] = row
    return len(have)
