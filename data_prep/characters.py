"""Characters from names: PERSON mentions found, split and trimmed, clustered into characters, and given a gender.

Name clustering is BookNLP's own NameCoref ("Mr. Sherlock Holmes", "Holmes", "Sherlock Holmes" -> one character,
nicknames through its alias table); gender priors come from BookNLP's table of how often Gutenberg text refers to a
name with he or she, plus honorifics.
"""
from __future__ import annotations

import math
import os
import pickle
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from whoqa.core.aliases import FEMALE_TITLES, MALE_TITLES, TITLES
from whoqa.core.book import Token
from data_prep.parse import Entity
from whoqa.core.lexicon import gender_table
from whoqa.core.seed import HASH_SEED, hash_seed_fixed
import warnings

_ROMAN = re.compile(r"[IVXLC]+\.?")
_NOT_A_NAME = re.compile(r"(?:[IVXLC]+|(?i:me|my|he|she|him|her))\.?")  # numerals are upper case: "Vic" stays
OTHER_CATS = {"GPE": "GPE", "LOC": "LOC", "FAC": "FAC", "ORG": "ORG"}


@dataclass
class NameMention:
    start: int
    end: int  # inclusive
    cat: str  # PER | GPE | LOC | FAC | ORG
    text: str
    char: int = -1  # cluster id (PER) or entity id (others)


def _is_title(tok: Token) -> bool:
    return tok.word.lower() in TITLES and tok.word[:1].isupper()


def _name_like(tok: Token) -> bool:
    return tok.word[:1].isupper() and tok.pos in ("PROPN", "NOUN") or _is_title(tok)


def find_name_mentions(tokens: list[Token], entities: list[Entity]) -> list[NameMention]:
    """PERSON mentions from NER, widened over titles ("Mr."), split at "and"/commas, plus "Mrs. X" that NER missed."""
    out: list[NameMention] = []
    covered = set()
    for e in entities:
        if e.label == "PERSON":
            s = e.start
            while s > 0 and tokens[s - 1].sentence == tokens[e.start].sentence and (
                    _is_title(tokens[s - 1]) or tokens[s - 1].pos == "PROPN" and tokens[s - 1].dep == "compound"
                    and tokens[s - 1].word[:1].isupper() and e.start <= tokens[s - 1].head <= e.end):
                s -= 1
            for a, b in _split_conjoined(tokens, s, e.end):
                if not _ROMAN.fullmatch(tokens[a].word) or a < b:
                    out.append(NameMention(a, b, "PER", " ".join(clean_word(t.word) for t in tokens[a:b + 1])))
                covered.update(range(a, b + 1))
        elif e.label in OTHER_CATS:
            covered.update(range(e.start, e.end + 1))
            out.append(NameMention(e.start, e.end, OTHER_CATS[e.label],
                                   " ".join(t.word for t in tokens[e.start:e.end + 1])))
    _relabel_people(tokens, out)
    out += _self_naming(tokens, covered)
    _propagate_names(tokens, entities, out, covered)
    # Title + proper noun(s) the tagger missed: "Mrs. Hudson", "Captain Nemo"
    i, n = 0, len(tokens)
    while i < n - 1:
        if _is_title(tokens[i]) and i not in covered and tokens[i + 1].pos == "PROPN" and tokens[i + 1].word[:1].isupper():
            j = i + 1
            while j + 1 < n and tokens[j + 1].pos == "PROPN" and tokens[j + 1].word[:1].isupper() \
                    and tokens[j + 1].sentence == tokens[i].sentence and j + 1 not in covered:
                j += 1
            if not any(k in covered for k in range(i, j + 1)):
                out.append(NameMention(i, j, "PER", " ".join(clean_word(t.word) for t in tokens[i:j + 1])))
                covered.update(range(i, j + 1))
            i = j + 1
        else:
            i += 1
    out = [m for m in out if not (m.cat == "PER" and _NOT_A_NAME.fullmatch(m.text))]  # "said I." is no name
    out.sort(key=lambda m: (m.start, m.end))
    return out


SPEECH_LEMMAS = {"say", "ask", "reply", "answer", "cry", "exclaim", "whisper", "shout", "murmur", "mutter", "think"}


def _relabel_people(tokens: list[Token], out: list[NameMention]) -> None:
    """NER often calls an unfamiliar name an ORG or a place ("Nightspore", "Hunca Munca"): a name made of proper
    nouns that NER also calls a person somewhere, or that says or asks something, is a person everywhere."""
    person_words = {m.text for m in out if m.cat == "PER"} | {
        w for m in out if m.cat == "PER" for w in m.text.split() if w[:1].isupper() and w.lower() not in TITLES}
    speaks = set()
    for m in out:
        if m.cat != "PER":
            head = tokens[m.end]
            if head.dep == "nsubj" and tokens[head.head].lemma in SPEECH_LEMMAS or _addressed(tokens, m.start, m.end):
                speaks.add(m.text)
    for m in out:
        if m.cat in ("ORG", "GPE", "LOC") and all(t.pos == "PROPN" for t in tokens[m.start:m.end + 1]) \
                and (m.text in person_words or m.text in speaks):
            m.cat = "PER"


def _addressed(tokens: list[Token], a: int, b: int) -> bool:
    """A name set off by commas as an adverbial ("Don't put your feet up, Huckleberry;"): spoken to, so a person."""
    head = tokens[b]
    before = tokens[a - 1].word if a > 0 else ""
    after = tokens[b + 1].word if b + 1 < len(tokens) else ""
    return head.dep == "npadvmod" and before in (",", "“", '"', "‘") and after in (",", ";", "!", "?", "--", ".")


def _self_naming(tokens: list[Token], covered: set) -> list[NameMention]:
    """Names a narrator gives themself that NER misses: "Call me Ishmael"."""
    out = []
    for t in tokens:
        if t.pos == "PROPN" and t.dep == "oprd" and t.index not in covered and tokens[t.head].lemma == "call" and \
                any(x.head == t.head and x.word.lower() == "me" for x in tokens[max(0, t.index - 4):t.index]):
            a = t.index
            while a > 0 and a - 1 not in covered and tokens[a - 1].pos == "PROPN" and tokens[a - 1].head == t.index:
                a -= 1
            out.append(NameMention(a, t.index, "PER", " ".join(clean_word(x.word) for x in tokens[a:t.index + 1])))
            covered.update(range(a, t.index + 1))
    return out


def _propagate_names(tokens: list[Token], entities: list[Entity], out: list[NameMention], covered: set) -> None:
    """A small NER model misses many repeats of a name it found elsewhere ("Harriet laughed"): a proper noun
    whose word NER calls a person more often than anything else becomes a person wherever it stands alone."""
    person, other = Counter(), Counter()
    for m in out:
        bag = person if m.cat == "PER" else other
        for t in tokens[m.start:m.end + 1]:
            if not _is_title(t):
                bag[t.word] += 1
    names = {w for w, n in person.items() if n > other[w] and w[:1].isupper() and len(w) > 1}
    i, n = 0, len(tokens)
    while i < n:
        t = tokens[i]
        if i not in covered and t.pos == "PROPN" and t.word in names:
            a = i
            while a > 0 and a - 1 not in covered and _is_title(tokens[a - 1]) and tokens[a - 1].sentence == t.sentence:
                a -= 1
            b = i
            while b + 1 < n and b + 1 not in covered and tokens[b + 1].pos == "PROPN" and \
                    tokens[b + 1].word[:1].isupper() and tokens[b + 1].sentence == t.sentence:
                b += 1
            out.append(NameMention(a, b, "PER", " ".join(clean_word(x.word) for x in tokens[a:b + 1])))
            covered.update(range(a, b + 1))
            i = b + 1
        else:
            i += 1


def _split_conjoined(tokens: list[Token], s: int, e: int) -> list[tuple[int, int]]:
    """Split "Edward and Harriet" into two spans; trim determiners, possessive 's and punctuation at the edges."""
    spans, a = [], s
    for i in range(s, e + 2):
        if i == e + 1 or tokens[i].pos == "CCONJ" or tokens[i].word in ("&", ",", ";"):
            b = i - 1
            while a <= b and not _name_like(tokens[a]):
                a += 1
            while b >= a and not _name_like(tokens[b]):
                b -= 1
            if a <= b:
                spans.append((a, b))
            a = i + 1
    return spans


@lru_cache(maxsize=1)
def _name_coref():
    with warnings.catch_warnings():  # booknlp imports pkg_resources, deprecated but harmless with setuptools<81
        warnings.simplefilter("ignore")
        from booknlp.english.name_coref import NameCoref
    with resources.as_file(resources.files("booknlp.english") / "data" / "aliases.txt") as p:
        return NameCoref(str(p))


def clean_word(word: str) -> str:
    """'Holmes--' -> 'Holmes': tokenizer leftovers must not split a character in two."""
    return word.strip("-\u2014_*\"'`,;:!?()[]") or word


class _Tok:
    """The two attributes NameCoref reads."""
    __slots__ = ("text", "pos")

    def __init__(self, text, pos):
        self.text, self.pos = text, pos


def cluster_names(tokens: list[Token], mentions: list[NameMention]) -> None:
    """Give each PER mention a cluster id (NameCoref) and each other entity an id per distinct name."""
    per = [m for m in mentions if m.cat == "PER"]
    if per:
        toks = [(clean_word(t.word), t.pos) for t in tokens]
        ents = [(m.start, m.end, "PROP_PER", m.text) for m in per]
        for m, r in zip(per, _name_refs(ents, toks)):
            m.char = r
    names: dict[tuple[str, str], int] = {}
    for m in mentions:
        if m.cat != "PER":
            m.char = names.setdefault((m.cat, m.text.lower()), len(names) + 1)


def _name_refs(ents: list[tuple], toks: list[tuple[str, str]]) -> list[int]:
    """NameCoref's cluster of each PER mention, as under whoqa's string-hash seed whatever this process's. Its subset
    test joins sets of strings, so whether "Chen Liu" and "Liu Chen" stay characters depends on the seed: run here
    when this process has whoqa's (the command, prepare's workers), else in a child started with it (an API caller)."""
    if hash_seed_fixed():
        return _name_coref().cluster_only_nouns(ents, [-1] * len(ents), [_Tok(*t) for t in toks])
    root = str(Path(__file__).resolve().parents[1])
    run = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {root!r}); "
                          "from data_prep.characters import _name_refs_child; _name_refs_child()"],
                         input=pickle.dumps((ents, toks)), capture_output=True,
                         env={**os.environ, "PYTHONHASHSEED": HASH_SEED})
    if run.returncode != 0:
        last = (run.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"name clustering failed in its child process (exit {run.returncode}): {last}")
    return pickle.loads(run.stdout)


def _name_refs_child() -> None:
    """_name_refs's child: stdin (entities, tokens) -> stdout the clusters, pickled (this process's own child)."""
    ents, toks = pickle.load(sys.stdin.buffer)
    assert hash_seed_fixed(), "started without whoqa's PYTHONHASHSEED"
    pickle.dump(_name_refs(ents, toks), sys.stdout.buffer)


def name_gender(names: Counter) -> tuple[str | None, float]:
    """Gender of a character from its proper names: titles are near-certain, first names are priors."""
    table = gender_table()
    he = she = 0.0
    for name, c in names.items():
        words = name.lower().split()
        if not words:
            continue
        if words[0] in MALE_TITLES:
            he += 20 * c
        elif words[0] in FEMALE_TITLES:
            she += 20 * c
        key = " ".join(w for w in words if w not in TITLES)
        counts = table.get(key) or table.get(key.split()[0] if key else "")
        if counts and sum(counts) > 0:  # one pseudo-reference each way: a name seen twice says little
            total = counts[0] + counts[1] + 2
            he += c * (counts[0] + 1) / total
            she += c * (counts[1] + 1) / total
    if he + she == 0:
        return None, 0.0
    p = max(he, she) / (he + she)
    if p < 0.75:
        return None, p
    return ("male" if he > she else "female"), p


def salience(count: int) -> float:
    return math.log1p(count)
