"""The Who set: NarrativeQA questions that ask for a person and whose answer names a character of the book.

Written in the bookqa-who schema under WS/who/:
    characters.json      {document_id: [{id, aliases}]}
    who_questions.json   [{question_id, document_id, question, answer1, answer2, answers: [character ids]}]
    report.json          what was kept, and why each other question was dropped, per book
"""
from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from data_prep.characters import FEMALE_TITLES, MALE_TITLES, TITLES
from data_prep.narrativeqa import DataError, NarrativeQA, Question
from whoqa.book import Book, BookFormatError, Character, atomic_write, is_done

log = logging.getLogger(__name__)

_WHO = re.compile(r"^\W*(who|whom|whose)\b|^\W*which\s+(character|person|man|woman|boy|girl)s?\b", re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
STOP = {"the", "a", "an", "his", "her", "their", "its", "and", "or", "of", "to", "in", "on", "is", "was", "he", "she",
        "they", "him", "it", "with", "by", "for", "at", "from", "as", "that", "who", "whom", "old", "young", "little",
        "by", "named", "called"}
DROP_NOT_WHO, DROP_NOT_CHARACTER, DROP_NO_ALIAS, DROP_NO_BOOK = (
    "not a Who question", "answer is not a character", "no alias match", "book not prepared")


def is_who_question(q: str) -> bool:
    return bool(_WHO.search(q))


def _words(text: str) -> list[str]:
    """Words with possessives and titles' dots removed: "Mr. Holmes's" -> ["Mr", "Holmes"]."""
    return [re.sub(r"'s?$", "", w) for w in _WORD.findall(text)]


def _key(words: list[str]) -> tuple[str, ...]:
    return tuple(w.lower() for w in words if w.lower() not in TITLES and w.lower().rstrip(".") not in
                 {t.rstrip(".") for t in TITLES} and w.lower() not in STOP)


def _title_gender(words: list[str]) -> str | None:
    for w in words:
        lw = w.lower()
        if lw in MALE_TITLES or lw + "." in MALE_TITLES:
            return "male"
        if lw in FEMALE_TITLES or lw + "." in FEMALE_TITLES:
            return "female"
    return None


def _edit1(a: str, b: str) -> bool:
    """True when a and b differ by at most one substitution, insertion or deletion."""
    if a == b:
        return True
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i + (len(a) == len(b)):] == b[i + 1:]


@dataclass
class AliasIndex:
    """Characters of one book, indexed by their normalised names."""
    characters: dict[int, Character]

    def __post_init__(self):
        self.full: dict[tuple, set[int]] = {}
        self.parts: dict[str, set[int]] = {}
        self.alias_gender: dict[int, set[str]] = {}
        for c in self.characters.values():
            for alias in c.aliases:
                w = _words(alias)
                k = _key(w)
                if not k:
                    continue
                self.full.setdefault(k, set()).add(c.id)
                for part in k:
                    self.parts.setdefault(part, set()).add(c.id)
                g = _title_gender(w)
                if g:
                    self.alias_gender.setdefault(c.id, set()).add(g)

    def _gender_ok(self, cid: int, g: str | None) -> bool:
        if g is None:
            return True
        known = self.alias_gender.get(cid) or ({self.characters[cid].gender} - {None})
        return not known or g in known

    def match(self, answer: str) -> tuple[set[int], str | None]:
        """Character ids an answer names, or the reason it names none.

        The answer is split into segments at "and", "or" and commas ("Edward and Harriet" -> two). In a segment a
        word before a possessive ("Emily's father") is not the answer. A segment matches a character when its name
        words equal one of the character's aliases (titles dropped), else when they are all part of an alias
        (first or last name alone); a gendered title must agree ("Mrs. Carey" is not Mr. Carey). Of several partial
        matches the most mentioned character is kept.
        """
        found: set[int] = set()
        namelike = False
        all_lower = answer in (answer.lower(), answer.upper())  # case says nothing about names here
        for seg in re.split(r",|;|\band\b|\bor\b|&", answer):
            seg = re.sub(r"\b[A-Za-z][\w\-]*'s?\s+(?=\w)", lambda m: "" if m.group(0).rstrip().endswith(("'s", "s'"))
                         else m.group(0), seg)
            words = _words(seg)
            names = [w for w in words if (all_lower or w[:1].isupper()) and w.lower() not in STOP]
            if not names:
                continue
            k = _key(names)
            if not k:
                continue
            namelike = namelike or any(w[:1].isupper() for w in names) or all_lower
            g = _title_gender(words)
            exact = {c for c in self.full.get(k, set()) if self._gender_ok(c, g)}
            if exact:
                found |= exact
                continue
            cands = None
            for part in k:
                ids = self.parts.get(part, set())
                cands = ids if cands is None else cands & ids
            cands = {c for c in (cands or set()) if self._gender_ok(c, g)}
            if not cands:  # "Sherlock Holmes" when the book only has "Holmes": an alias inside the answer
                cands = {c for key, ids in self.full.items() if set(key) <= set(k) for c in ids if self._gender_ok(c, g)}
            if not cands:  # a spelling variant: "Rodrique" for "Rodrigue"
                cands = {c for part in k if len(part) >= 5 for p2, ids in self.parts.items()
                         if abs(len(p2) - len(part)) <= 1 and _edit1(part, p2) for c in ids if self._gender_ok(c, g)}
            if cands:
                top = max(self.characters[c].count for c in cands)
                found |= {c for c in cands if self.characters[c].count == top}
        if found:
            return found, None
        return found, (DROP_NO_ALIAS if namelike and not all_lower else DROP_NOT_CHARACTER)


def build_who_set(data: NarrativeQA, workspace: Path) -> dict:
    """Build WS/who/ from qaps.csv and the processed books; returns the report."""
    workspace = Path(workspace)
    books_dir = workspace / "books"
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
    out = workspace / "who"
    prepared = [{"question_id": q.question_id, "document_id": q.document_id, "question": q.question,
                 "answer1": q.answer1, "answer2": q.answer2} for q in questions if q.document_id in characters_out]
    atomic_write(workspace / "questions.json", json.dumps(prepared, indent=0))  # every question of a prepared book
    try:  # the BERT ranker trains on summaries (of other folds' books only)
        summaries = {d: s for d, s in data.summaries().items() if d in characters_out}
    except DataError:
        summaries = {}
    atomic_write(workspace / "summaries.json", json.dumps(summaries))
    atomic_write(out / "characters.json", json.dumps(characters_out, indent=0))
    atomic_write(out / "who_questions.json", json.dumps(kept, indent=1))
    atomic_write(out / "report.json", json.dumps(report, indent=1))
    return report
