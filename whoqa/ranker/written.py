"""A Who answer as the reader writes it ("Ignosi, the rightful king"), linked to the book's cast.

Counting finds the central character; reading finds the one the event names. The reader of other questions writes a
short answer from the passages it read, and this module says whom it names:
- each name the answer writes, left to right (the book's aliases: full names, titles, first or last names, spelling
  variants; whoqa.core.aliases.AliasIndex.match), through its person's cast representative;
- a possessive names someone else ("Helen's uncle" is the uncle, not Helen): such a name is passed over, unless the
  question asks "Whose ...?";
- a name the question itself names is not the answer unless the question is reflexive ("Who does Glenister love?"
  is not answered "Glenister"); the next name written stands;
- an answer naming nobody the cast holds is linked through the passage sentence that holds its words: the character
  mentioned there as the answer's words are (a pronoun or "the peddler" resolved by the book's coreference), else it
  stays unlinked, and says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.aliases import NO_ALIAS, AliasIndex
from whoqa.core.names import CAP_SPAN
from whoqa.core.query import Query
from whoqa.ranker.cast import cast_of

WORD = re.compile(r"[A-Za-z][\w\-']*")
FUNCTION = {"the", "a", "an", "of", "to", "in", "on", "and", "or", "his", "her", "their", "who", "is", "was", "he",
            "she", "it", "they", "by", "with", "for", "at", "from", "that", "as", "be", "been", "has", "had"}


@dataclass
class Written:
    """A written Who answer and the cast members it names, the answer first."""
    text: str
    linked: list[int] = field(default_factory=list)  # cast representatives, in the order written (named ones out)
    named_passed: list[int] = field(default_factory=list)  # ones the question names, passed over
    sentence: int | None = None  # the passage sentence the answer came from (holds its name or its words)
    how: str = ""  # "name" (the answer names them), "mention" (through the passage's resolved mention), ""
    outside: list[int] = field(default_factory=list)  # (knowing the book) people it names the passages do not
    unknown: list[str] = field(default_factory=list)  # (knowing the book) names it writes that no cast member has

    @property
    def answer(self) -> int | None:
        return self.linked[0] if self.linked else None


ROLE = re.compile(r"\b(?:plays|played|playing|acts|acted|acting|as|role of|part of|named after|called)\s+$", re.I)


def _named_ids(text: str, aliases: AliasIndex, owners: bool = False, prefer: set[int] = frozenset(),
               unknown: list[str] | None = None, roles: list[str] | None = None) -> list[int]:
    """The characters the answer's names name, left to right; a possessive's owner left out, unless the question
    asks for an owner (`owners`: "Whose doll house ...?" is answered "Lucinda's doll house"). With `unknown` (the
    linking that knows the book): a role's name is not its player ("the girl who acts Juliet" is not Juliet), a
    name two people share goes to the one in `prefer` (the read passages' people), and each name no cast member has
    is put in `unknown`, each role's name in `roles`."""
    out: list[int] = []
    knows = unknown is not None
    for m in CAP_SPAN.finditer(text):
        span = m.group(0)
        if _owned(text, m) and not owners:
            continue  # "Helen's uncle": not Helen
        span = span.removesuffix("'s").removesuffix("’s")
        if span.split()[0].lower() in {"who", "the", "a", "an", "he", "she", "it", "they", "i"} and len(span.split()) == 1:
            continue
        if knows and ROLE.search(text[:m.start()]):
            roles.append(span)  # "who acts Juliet": the role, not the person
            continue
        ids, why = aliases.match(span, prefer if knows else frozenset())
        if knows and not ids and why == NO_ALIAS and m.start() > 0:
            unknown.append(span)  # (a capital opening the answer may be no name: "Her uncle")
        for i in sorted(ids, key=lambda c: -aliases.characters[c].count):
            if i not in out:
                out.append(i)
    return out


def _owned(text: str, m: re.Match) -> bool:
    """Whether a name span of the answer is a possessive's owner ("Helen's" in "Helen's uncle")."""
    return m.group(0).endswith(("'s", "’s")) or text[m.end():m.end() + 2] in ("'s", "’s")


def _owner_words(text: str) -> set[str]:
    """The words of the answer's possessive owners: "Helen's murderer" describes someone who is not Helen, so her
    name's words never link the description to her mention."""
    return {w.lower() for m in CAP_SPAN.finditer(text) if _owned(text, m)
            for w in WORD.findall(m.group(0).removesuffix("'s").removesuffix("’s"))}


def _content(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text) if w.lower() not in FUNCTION}


def _best_sentence(book, sentences: list[int], text: str, people: set[int] | None = None) -> int | None:
    """The passage sentence sharing most of the answer's words (one mentioning these people first)."""
    want = _content(text)
    best, score = None, 0.0
    for s in sentences:
        got = _content(book.sentence_text(s)[0])
        overlap = len(want & got) / max(len(want), 1)
        mentioned = bool(people) and any(m.char_id in people for m in book.sentence_mentions(s))
        value = overlap + (1.0 if mentioned else 0.0)
        if value > score:
            best, score = s, value
    return best


def link(book, aliases: AliasIndex, query: Query, text: str | None, sentences: list[int] = (),
         knows: bool = False) -> Written:
    """The written answer `text` to `query` (read in the book) linked to the cast of `book` (module docstring);
    `sentences`: the ids of the passage sentences the reader read. `knows`: the linking that knows the book (a role
    is not its player, a shared name is the passages' person, never a person the passages do not mention, a name no
    cast member has is said and not linked through a description)."""
    written = Written(text or "")
    if not text:
        return written
    cast = cast_of(book)
    reflexive = query.reflexive
    named_reps = {cast.of(n) for n in query.named} - {None}
    owners = query.text.lstrip(" \"'“").lower().startswith("whose")
    people = {cast.of(m.char_id) for s in sentences for m in book.sentence_mentions(s)} - {None}
    members = {c for r in people for c in cast.groups.get(r, [r])}
    roles: list[str] = []
    for cid in _named_ids(text, aliases, owners, members, written.unknown if knows else None, roles):
        rep = cast.of(cid)
        if rep is None or rep in written.linked or rep in written.named_passed or rep in written.outside:
            continue
        if rep in named_reps and not reflexive:
            written.named_passed.append(rep)
            continue
        if knows and sentences and rep not in people:
            written.outside.append(rep)
            continue
        written.linked.append(rep)
    if written.linked:
        written.how = "name"
        members = set(cast.groups[written.linked[0]])
        written.sentence = _best_sentence(book, list(sentences), text, members)
        return written
    if written.unknown or written.outside:
        return written  # a name that is nobody's here is not a description to link through
    s = _best_sentence(book, list(sentences), text)  # a description: who the passage says it is
    if s is None:
        return written
    want = _content(text) - (set() if owners else _owner_words(text))
    role = {w.lower() for r in roles for w in WORD.findall(r)}
    played = bool(role) and bool(role & _content(book.sentence_text(s)[0]))  # the sentence that names the role
    for m in book.sentence_mentions(s):
        rep = cast.of(m.char_id)
        words = {t.word.lower() for t in book.tokens[m.start:m.end + 1]}
        if rep is None or rep in named_reps and not reflexive or words & role or not (played or words & want):
            continue  # (knowing the book: the role's own mention is not its player; another person there is)
        written.linked, written.sentence, written.how = [rep], s, "mention"
        break
    return written


def load_written(path: Path) -> dict[str, list[int]]:
    """question id -> the characters its written answer names (cast representatives, in order), from a file of
    written answers (.jsonl or .jsonl.gz rows with "key" and "linked", or `whoqa choice-rows`'s with "written"); a
    missing or damaged file is one line."""
    import gzip
    import json
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return {str(r["key"]): [int(c) for c in (r["linked"] if "linked" in r else r.get("written")) or []]
                    for r in map(json.loads, f)}
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: make it with `whoqa choice-rows --workspace WS --out {path}`") \
            from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a file of written answers ({e}): make it again with "
                         f"`whoqa choice-rows --workspace WS --out {path}`") from None
