"""The Who set: NarrativeQA questions that ask for a person and whose answer names a character of the book.

Written in the bookqa-who schema under WS/who/:
    characters.json      {document_id: [{id, name, aliases, count, gender}]}
    who_questions.json   [{question_id, document_id, question, answer1, answer2, answers: [character ids]}]
    report.json          what was kept, and why each other question was dropped, per book
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from pathlib import Path

from data_prep.narrativeqa import DataError, NarrativeQA, Question
from whoqa.core.artifacts import DamagedArtifact, read_json, read_record
from whoqa.core.aliases import NO_ALIAS, NOT_CHARACTER, AliasIndex
from whoqa.core.workspace import MissingStage
from whoqa.core.book import Book, BookFormatError, atomic_write, is_done
from whoqa.core.questions import question_kind
from whoqa.core.workspace import Workspace

log = logging.getLogger(__name__)

DROP_NOT_WHO, DROP_NOT_CHARACTER, DROP_NO_ALIAS, DROP_NO_BOOK = (
    "not a Who question", NOT_CHARACTER, NO_ALIAS, "book not prepared")


def is_who_question(q: str) -> bool:
    """Whether the question asks for a person (whoqa.core.questions.question_kind)."""
    return question_kind(q).who


def build_who_set(data: NarrativeQA, workspace: Path) -> dict:
    """Build WS/who/ from qaps.csv and the processed books; returns the report."""
    workspace = Path(workspace)
    books_dir = Workspace(workspace).books
    questions = data.questions()
    by_book: dict[str, list[Question]] = {}
    for q in questions:
        by_book.setdefault(q.document_id, []).append(q)
    characters_out, kept = {}, []
    per_book: dict[str, Counter] = {}
    dropped_examples: dict[str, list] = {}
    for doc_id, qs in sorted(by_book.items()):
        stats = per_book.setdefault(doc_id, Counter())
        index = None
        if is_done(books_dir / doc_id, doc_id):
            try:
                book = Book.load(books_dir / doc_id, doc_id)
                index = AliasIndex(book.characters)
                characters_out[doc_id] = [{"id": c.id, "name": c.name, "aliases": c.aliases, "count": c.count,
                                           "gender": c.gender} for c in book.characters.values()]
            except BookFormatError as e:
                log.warning("book %s skipped in the Who set: %s", doc_id, e)
        for q in qs:
            stats["questions"] += 1
            if not is_who_question(q.question):
                stats[DROP_NOT_WHO] += 1
                continue
            stats["who_questions"] += 1
            if index is None:
                stats[DROP_NO_BOOK] += 1
                continue
            ids, reasons = set(), []
            for ans in (q.answer1, q.answer2):
                got, why = index.match(ans)
                ids |= got
                reasons.append(why)
            if ids:
                stats["kept"] += 1
                kept.append({"question_id": q.question_id, "document_id": doc_id, "question": q.question,
                             "answer1": q.answer1, "answer2": q.answer2, "answers": sorted(ids)})
            else:
                why = DROP_NO_ALIAS if DROP_NO_ALIAS in reasons else DROP_NOT_CHARACTER
                stats[why] += 1
                dropped_examples.setdefault(why, []).append(
                    {"question_id": q.question_id, "question": q.question, "answers": [q.answer1, q.answer2]})
    total = Counter()
    for s in per_book.values():
        total.update(s)
    report = {"totals": dict(total),
              "kept_share_of_who_questions": round(total["kept"] / total["who_questions"], 4)
              if total["who_questions"] else 0.0,
              "per_book": {b: dict(s) for b, s in per_book.items()},
              "dropped": dropped_examples}
    ws = Workspace(workspace)
    prepared = [{"question_id": q.question_id, "document_id": q.document_id, "question": q.question,
                 "answer1": q.answer1, "answer2": q.answer2} for q in questions if q.document_id in characters_out]
    atomic_write(Workspace(workspace).questions, json.dumps(prepared, indent=0))  # every question of a prepared book
    try:  # the BERT ranker trains on summaries (of other folds' books only)
        summaries = {d: s for d, s in data.summaries().items() if d in characters_out}
    except DataError:
        summaries = {}
    atomic_write(Workspace(workspace).summaries, json.dumps(summaries))
    atomic_write(ws.who_characters, json.dumps(characters_out, indent=0))
    atomic_write(ws.who_questions, json.dumps(kept, indent=1))
    atomic_write(ws.who_report, json.dumps(report, indent=1))
    return report


def load_questions(workspace: Path) -> dict[str, list[dict]]:
    path = Workspace(workspace).questions
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `whoqa prepare --workspace {workspace}` first")
    by_book: dict[str, list[dict]] = {}
    for q in read_json(path, f"run `whoqa prepare --workspace {workspace}` (it writes the questions again)", list):
        by_book.setdefault(q["document_id"], []).append(q)
    return by_book


def load_summaries(workspace: Path) -> dict[str, str]:
    """Each prepared book's NarrativeQA summary (WS/summaries.json: the BERT ranker trains on them)."""
    path = Workspace(workspace).summaries
    if not path.is_file():
        raise MissingStage(f"{path} is missing: run `whoqa prepare --workspace {workspace}` (it copies summaries.csv)")
    return read_json(path, f"run `whoqa prepare --workspace {workspace}` (it writes the summaries again)", dict)


def load_texts(workspace: Path) -> dict[str, dict]:
    """The books added from text files (WS/texts.json: book id -> its file and first line); {} when none were."""
    return read_record(Workspace(workspace).texts, "move it aside (`whoqa check --repair`); `whoqa ask --text` "
                       "records a text again", {})


def load_who_set(workspace: Path) -> tuple[dict[str, list[dict]], list[dict]]:
    """(characters by book, Who questions): the one reader of WS/who/, every reader of the Who set goes through it
    (a missing file says which command makes it; a damaged one is DamagedArtifact, as `whoqa check` knows it)."""
    paths = [Workspace(workspace).who_characters, Workspace(workspace).who_questions]
    for p in paths:
        if not p.is_file():
            raise MissingStage(f"{p} is missing: run `whoqa prepare --workspace {workspace}` first")
    repair = f"rebuild the Who set with `whoqa prepare --workspace {workspace}` (books already prepared are kept)"
    characters, questions = read_json(paths[0], repair, dict), read_json(paths[1], repair, list)
    if not all(isinstance(v, list) and all(isinstance(c, dict) for c in v) for v in characters.values()):
        raise DamagedArtifact(paths[0], "a book's characters are not a list of records", repair)
    if not all(isinstance(q, dict) and {"document_id", "question_id", "answers"} <= set(q) for q in questions):
        raise DamagedArtifact(paths[1], "a question is not a record with document_id, question_id and answers", repair)
    return characters, questions


def fingerprint(workspace: Path) -> str:
    h = hashlib.sha256()
    for path in (Workspace(workspace).who_characters, Workspace(workspace).who_questions):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
