"""What kind of question it is: one reading for every layer. The who-set filter keeps the questions that ask for a
person (`QuestionKind.who`), the router picks a reader by the question's wh-word (`QuestionKind.word`); both read
`question_kind`, so a question never has two kinds."""
from __future__ import annotations

import re
from dataclasses import dataclass

WH_WORDS = ("what", "who", "why", "how", "where", "when", "which")  # the words readers are routed by
_WHO = re.compile(r"^\W*(who|whom|whose)\b|^\W*which\s+(character|person|man|woman|boy|girl)s?\b", re.I)


@dataclass(frozen=True)
class QuestionKind:
    word: str  # its wh-word (the first of WH_WORDS among its first three words), else "other"
    who: bool  # it asks for a person: it opens with who / whom / whose, or "which character|person|man ..."


def question_kind(question: str) -> QuestionKind:
    """The question's kind: its wh-word (what the reader routes read) and whether it asks for a person (what the Who
    set and the service's Who routes read)."""
    words = question.lower().replace("'s", " ").split()[:3]
    return QuestionKind(next((w for w in words if w in WH_WORDS), "other"), bool(_WHO.search(question)))
