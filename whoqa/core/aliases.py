"""Character aliases: which characters of a book an answer or a question names (titles, possessives, partial names,
spelling variants). Shared by the Who set, retrieval, the memory network and the BERT ranker."""
from __future__ import annotations

import re
from dataclasses import dataclass

from whoqa.core.book import Character

MALE_TITLES = {"mr", "mr.", "mister", "sir", "lord", "monsieur", "m.", "herr", "signor", "senor", "señor", "don",
               "uncle", "father", "brother", "king", "prince", "duke", "count", "baron", "earl", "master", "squire",
               "colonel", "col.", "captain", "capt.", "major", "general", "sergeant", "lieutenant", "admiral",
               "bishop", "abbe", "abbé", "friar", "parson"}
FEMALE_TITLES = {"mrs", "mrs.", "miss", "ms", "ms.", "lady", "madame", "mme", "mme.", "mademoiselle", "mlle", "mlle.",
                 "dame", "aunt", "mother", "sister", "queen", "princess", "duchess", "countess", "baroness",
                 "mistress", "frau", "fraulein", "signora", "senora", "señora", "dona", "doña"}
NEUTRAL_TITLES = {"dr", "dr.", "doctor", "professor", "prof.", "rev.", "reverend", "judge", "inspector", "saint",
                  "st."}
TITLES = MALE_TITLES | FEMALE_TITLES | NEUTRAL_TITLES
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
STOP = {"the", "a", "an", "his", "her", "their", "its", "and", "or", "of", "to", "in", "on", "is", "was", "he", "she",
        "they", "him", "it", "with", "by", "for", "at", "from", "as", "that", "who", "whom", "old", "young", "little",
        "by", "named", "called"}
NOT_CHARACTER, NO_ALIAS = "answer is not a character", "no alias match"


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

    @classmethod
    def from_records(cls, records: list[dict]) -> "AliasIndex":
        """From a book's characters as the Who set stores them (WS/who/characters.json)."""
        return cls({c["id"]: Character(c["id"], c["name"], c["aliases"], c["count"], c["gender"]) for c in records})

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

    def match(self, answer: str, prefer: set[int] = frozenset()) -> tuple[set[int], str | None]:
        """Character ids an answer names, or the reason it names none.

        The answer is split into segments at "and", "or" and commas ("Edward and Harriet" -> two). In a segment a
        word before a possessive ("Emily's father") is not the answer. A segment matches a character when its name
        words equal one of the character's aliases (titles dropped), else when they are all part of an alias
        (first or last name alone); a gendered title must agree ("Mrs. Carey" is not Mr. Carey). Of several partial
        matches the most mentioned character is kept, of those in `prefer` where any is (a first name two people
        share: the one the passages read mention).
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
                cands = (cands & prefer) or cands
                top = max(self.characters[c].count for c in cands)
                found |= {c for c in cands if self.characters[c].count == top}
        if found:
            return found, None
        return found, (NO_ALIAS if namelike and not all_lower else NOT_CHARACTER)
