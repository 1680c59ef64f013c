"""What kind of question it is: one reading for every layer. The who-set filter keeps the questions that ask for a
person (`QuestionKind.who`), the router picks a reader by the question's wh-word (`QuestionKind.word`); both read
`question_kind`, so a question never has two kinds."""
from __future__ import annotations

import re
from dataclasses import dataclass

WH_WORDS = ("what", "who", "why", "how", "where", "when", "which")  # the words readers are routed by
_WHO = re.compile(r"^\W*(who|whom|whose)\b|^\W*which\s+(character|person|man|woman|boy|girl)s?\b", re.I)


PERSON_NOUNS = {  # what "which ..." asks for when it asks for a person ("Which widow takes the twins in?")
    "character", "person", "people", "man", "men", "woman", "women", "boy", "girl", "child", "children", "member",
    "servant", "servants", "maid", "widow", "widower", "concierge", "knight", "king", "queen", "prince", "princess",
    "lord", "lady", "gentleman", "friend", "brother", "sister", "son", "daughter", "father", "mother", "husband",
    "wife", "uncle", "aunt", "cousin", "nephew", "niece", "suitor", "lover", "doctor", "officer", "soldier", "sailor",
    "captain", "prisoner", "guest", "stranger", "chief", "politician", "critic", "detective", "inspector", "student",
    "teacher", "priest", "judge", "lawyer", "thief", "murderer", "twin", "twins", "sibling", "relative", "heir",
    "heiress", "suspect", "witness", "guard", "hunter", "keeper", "artist", "painter", "writer", "poet", "actor",
    "actress", "singer", "dancer", "phrenologist", "scientist", "professor", "explorer", "passenger", "companion"}
_WHICH = re.compile(r"^\W*which\s+(?:of\s+(?:the|his|her|their|these|those)\s+|one\s+of\s+the\s+)?"
                    r"((?:[A-Za-z\-]+[\s,]+){0,2}[A-Za-z\-]+)", re.I)  # its noun among the next three words


@dataclass(frozen=True)
class QuestionKind:
    word: str  # its wh-word (the first of WH_WORDS among its first three words), else "other"
    who: bool  # a Who question as the Who set counts them: who / whom / whose, or "which character|person|man ..."
    person: bool = False  # it asks for a person, as the service answers it: a Who question, or "which" with a noun for
    #                       people ("Which widow ...?", "Which of the servants ...?"): answered with the characters


def question_kind(question: str) -> QuestionKind:
    """The question's kind: its wh-word (what the reader routes read) and whether it asks for a person (what the Who
    set and the service's Who routes read)."""
    words = question.lower().replace("'s", " ").split()[:3]
    who = bool(_WHO.search(question))
    m = _WHICH.match(question)
    person = who or bool(m) and bool(set(re.findall(r"[a-z\-]+", m.group(1).lower())) & PERSON_NOUNS)
    return QuestionKind(next((w for w in words if w in WH_WORDS), "other"), who, person)
