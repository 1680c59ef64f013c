"""The Who set: NarrativeQA questions that ask for a person and whose answer names a character of the book.

Written in the bookqa-who schema under WS/who/:
    characters.json      {document_id: [{id, name, aliases, count, gender}]}
    who_questions.json   [{question_id, document_id, question, answer1, answer2, answers: [character ids]}]
    report.json          what was kept, and why each other question was dropped, per book
written and read through whoqa.core.store (`write_who_set`, `load_who_set`), as are WS/questions.json and
WS/summaries.json.
"""
from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from data_prep.narrativeqa import DataError, NarrativeQA, Question
from whoqa.core.aliases import NO_ALIAS, NOT_CHARACTER, AliasIndex
from whoqa.core.book import Book, BookFormatError, is_done
from whoqa.core.lexicon import is_who_question
from whoqa.core.store import write_questions, write_summaries, write_who_set
from whoqa.core.workspace import Workspace

log = logging.getLogger(__name__)

DROP_NOT_WHO, DROP_NOT_CHARACTER, DROP_NO_ALIAS, DROP_NO_BOOK = (
    "not a Who question", NOT_CHARACTER, NO_ALIAS, "book not prepared")


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
    prepared = [{"question_id": q.question_id, "document_id": q.document_id, "question": q.question,
                 "answer1": q.answer1, "answer2": q.answer2} for q in questions if q.document_id in characters_out]
    write_questions(workspace, prepared)  # every question of a prepared book
    try:  # the BERT ranker trains on summaries (of other folds' books only)
        summaries = {d: s for d, s in data.summaries().items() if d in characters_out}
    except DataError:
        summaries = {}
    write_summaries(workspace, summaries)
    write_who_set(workspace, characters_out, kept, report)
    return report
