"""The names a question holds: its capitalised spans, each with the book's characters it names (none for a name the
book does not know). One reading of a question's names serves BM25F's character field, the memory network's question
tokens, the feature ranker's "named in the question" and `ask`'s warning about names the book lacks."""
from __future__ import annotations

import re
from dataclasses import dataclass

CAP_SPAN = re.compile(  # a capitalised name-like span: "Mr. Sherlock Holmes's", "Comte de Gormas"
    r"[A-Z][\w\-]*(?:'s)?(?:\s+(?:[A-Z][\w\-]*(?:'s)?|de|van|von|of|the)\b)*")
NOT_NAMES = {  # question words a capitalised span may open with: never a name the book lacks
    "who", "whom", "whose", "which", "what", "where", "when", "why", "how", "did", "does", "is", "was"}


@dataclass(frozen=True)
class NameSpan:
    text: str
    start: int
    end: int
    ids: tuple[int, ...]  # the characters it names, sorted; () for a name no character of the book has


def name_spans(question: str, aliases) -> list[NameSpan]:
    """Every capitalised span of the question, left to right, with the characters it names (`aliases`: an AliasIndex
    or a book's characters)."""
    from whoqa.core.aliases import AliasIndex
    index = aliases if isinstance(aliases, AliasIndex) else AliasIndex(aliases)
    return [NameSpan(m.group(0), m.start(), m.end(), tuple(sorted(index.match(m.group(0))[0])))
            for m in CAP_SPAN.finditer(question)]


def named_characters(spans: list[NameSpan]) -> set[int]:
    return {c for s in spans for c in s.ids}


def unknown_names(spans: list[NameSpan]) -> list[str]:
    """The spans that look like names but name no character (question words and "I" aside)."""
    return [s.text for s in spans if not s.ids and s.text.split()[0].lower() not in NOT_NAMES
            and s.text != "I"]
