"""Processed books: BookNLP's own file formats (the contract between `prepare` and everything after it).

    <id>.tokens    TSV, one row per token (BookNLP's 13 columns; head ids are document token ids)
    <id>.entities  TSV: COREF start_token end_token prop cat text (document token ids, end inclusive)
    <id>.book      JSON: {"characters": [{id, count, g, mentions: {proper, common, pronoun}, agent, patient, poss, mod}]}

Both engines (the offline one and the real BookNLP) write these, and `Book.load` reads either, so files BookNLP made
elsewhere work too. Downstream stages see a book only through `Book`.
"""
from __future__ import annotations

import csv
from bisect import bisect_left
from collections import Counter
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.artifacts import DamagedArtifact, read_json
from whoqa.core.files import atomic_write

TOKEN_COLUMNS = ["paragraph_ID", "sentence_ID", "token_ID_within_sentence", "token_ID_within_document", "word", "lemma",
                 "byte_onset", "byte_offset", "POS_tag", "fine_POS_tag", "dependency_relation", "syntactic_head_ID",
                 "event"]
ENTITY_COLUMNS = ["COREF", "start_token", "end_token", "prop", "cat", "text"]
SUFFIXES = (".tokens", ".entities", ".book")
POSSESSIVE_TAGS = {"PRP$", "WP$"}
GENDERS = {"he/him/his": "male", "she/her": "female", "they/them/their": "plural"}


class BookFormatError(ValueError):
    """A processed-book file is missing or malformed; the message names it."""


@dataclass
class Token:
    paragraph: int
    sentence: int
    index: int  # token id within the document
    word: str
    lemma: str
    start_char: int
    end_char: int
    pos: str
    tag: str
    dep: str
    head: int  # document token id of the syntactic head (itself for a root)


@dataclass
class Mention:
    start: int  # first token (document id)
    end: int  # last token, inclusive
    char_id: int
    prop: str  # PROP | NOM | PRON
    cat: str  # PER | LOC | ...
    text: str


@dataclass
class Character:
    id: int
    name: str  # canonical name: the most frequent proper mention ("NARRATOR"/"CHAR_<id>" when it has none)
    aliases: list[str]  # proper names, most frequent first
    count: int  # mentions of every kind
    gender: str | None  # male | female | plural | None


@dataclass
class Book:
    id: str
    tokens: list[Token]
    sentences: list[tuple[int, int]]  # (first token, last token + 1) per sentence id
    mentions: list[Mention]  # mentions of the characters only, sorted by start
    characters: dict[int, Character]
    token_char: dict[int, int] = field(default_factory=dict)  # token id -> character id of the mention it is in
    others: list[Mention] = field(default_factory=list)  # places, organisations, ...: what a name is when not a person

    @classmethod
    def load(cls, folder: str | Path, book_id: str | None = None) -> "Book":
        folder = Path(folder)
        if book_id is None:
            found = sorted(folder.glob("*.tokens"))
            if len(found) != 1:
                raise BookFormatError(f"{folder}: expected one <id>.tokens file, found {len(found)}; pass the book id")
            book_id = found[0].stem
        paths = {s: folder / f"{book_id}{s}" for s in SUFFIXES}
        for s, p in paths.items():
            if not p.is_file():
                raise BookFormatError(f"book {book_id}: {p} is missing; run `whoqa prepare` for this book")
        tokens = read_tokens(paths[".tokens"])
        characters = read_characters(paths[".book"])
        # a mention counts when its entity is a character of .book (BookNLP's rule: seen at least twice; groups
        # such as a "they" are PER entities in .entities but not characters)
        entities = read_entities(paths[".entities"], len(tokens))
        mentions = [m for m in entities if m.cat == "PER" and m.char_id in characters]
        sentences: list[tuple[int, int]] = []
        for t in tokens:
            if t.sentence == len(sentences):
                sentences.append((t.index, t.index + 1))
            elif t.sentence == len(sentences) - 1:
                sentences[-1] = (sentences[-1][0], t.index + 1)
            else:
                raise BookFormatError(f"book {book_id}: sentence ids are not consecutive at token {t.index}")
        token_char = {}
        for m in mentions:
            for i in range(m.start, m.end + 1):
                token_char[i] = m.char_id
        return cls(book_id, tokens, sentences, mentions, characters, token_char, [m for m in entities if m.cat != "PER"])

    def sentence_words(self, sid: int) -> list[str]:
        a, b = self.sentences[sid]
        return [t.word for t in self.tokens[a:b]]

    def sentence_text(self, sid: int) -> tuple[str, list[int]]:
        """(a sentence as the book writes it, where each of its tokens starts in that text): tokens are joined with
        a space only where the book has one between them (their character offsets), so "do n't" reads "don't" and
        "Kelso 's" "Kelso's"; line ends become spaces."""
        a, b = self.sentences[sid]
        text, starts = "", []
        for i in range(a, b):
            t = self.tokens[i]
            if i > a:
                prev = self.tokens[i - 1]
                gap = t.start_char > prev.end_char if 0 <= prev.end_char <= t.start_char else True
                text += " " if gap else ""
            starts.append(len(text))
            text += t.word
        return text, starts

    def replaced_sentence(self, sid: int) -> list[str]:
        """Words of a sentence with each character mention replaced by its id: `CHAR_3 sold CHAR_3 's house`."""
        a, b = self.sentences[sid]
        out: list[str] = []
        i = a
        while i < b:
            cid = self.token_char.get(i)
            if cid is None:
                out.append(self.tokens[i].word)
                i += 1
                continue
            j = i
            while j + 1 < b and self.token_char.get(j + 1) == cid and not self._starts_mention(j + 1):
                j += 1
            out.append(char_token(cid))
            if j == i and self.tokens[i].tag in POSSESSIVE_TAGS:
                out.append("'s")
            i = j + 1
        return out

    def _starts_mention(self, i: int) -> bool:
        if not hasattr(self, "_starts"):
            self._starts = {m.start for m in self.mentions}
        return i in self._starts

    def shown_name(self, char_id: int) -> str | None:
        """The name a passage shows for a character: its canonical name, "the narrator" (the engine's id 0 with no
        name of its own), or None (no proper name)."""
        c = self.characters.get(char_id)
        if c is None:
            return None
        if char_id == 0 and not c.aliases:
            return "the narrator"
        return None if c.name.startswith("CHAR_") else c.name

    def sentence_mentions(self, sid: int) -> list[Mention]:
        """The character mentions that start in a sentence."""
        if not hasattr(self, "_start_list"):
            self._start_list = [m.start for m in self.mentions]
        a, b = self.sentences[sid]
        return self.mentions[bisect_left(self._start_list, a):bisect_left(self._start_list, b)]

    def upto(self, n: int) -> "Book":
        """The book's first n sentences as a book of its own (`ask --upto`, no spoilers): its characters are those
        mentioned there, counted there and named as they are there (a proper name there, else how the text refers to
        them there: "the stranger"), so nothing after the cut can reach an answer."""
        n = max(1, min(int(n), len(self.sentences)))
        if n == len(self.sentences):
            return self
        end = self.sentences[n - 1][1]
        mentions = [m for m in self.mentions if m.end < end]
        counts = Counter(m.char_id for m in mentions)
        characters = {}
        for cid, c in self.characters.items():
            if not counts[cid]:
                continue
            proper = [t for t, _ in Counter(m.text for m in mentions if m.char_id == cid and m.prop == "PROP")
                      .most_common()]
            common = Counter(m.text for m in mentions if m.char_id == cid and m.prop == "NOM").most_common(1)
            name = proper[0] if proper else common[0][0] if common else (c.name if cid == 0 else char_token(cid))
            characters[cid] = Character(cid, name, proper, counts[cid], c.gender)
        return Book(self.id, self.tokens[:end], self.sentences[:n], mentions, characters,
                    {i: c for i, c in self.token_char.items() if i < end}, [m for m in self.others if m.end < end])

    def cut(self, upto: str) -> int:
        """How many sentences a reader who has read `upto` has read: "40%" of the book's sentences, or everything
        before a heading as the book writes it ("Chapter 12" finds CHAPTER XII too; the last one, after any table of
        contents). A ValueError says what was not found."""
        spec = (upto or "").strip()
        share = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%", spec)
        total = len(self.sentences)
        if share:
            p = float(share.group(1))
            if not 0 < p <= 100:
                raise ValueError(f"read up to {spec}: give a share between 0% and 100%")
            return max(1, round(total * p / 100))
        words = [w.lower() for w in re.findall(r"\w+|[^\w\s]", spec)]
        if not words:
            raise ValueError('read up to: give a share ("40%") or a chapter heading ("Chapter 12")')
        forms = [words] + ([words[:-1] + [alt] for alt in _number_forms(words[-1])])
        starts = [t.index for k, t in enumerate(self.tokens)
                  if k == 0 or t.sentence != self.tokens[k - 1].sentence or t.paragraph != self.tokens[k - 1].paragraph]
        found = [i for i in starts for f in forms
                 if [t.word.lower() for t in self.tokens[i:i + len(f)]] == f]
        if not found:
            raise ValueError(f"read up to {spec!r}: no line of this book starts so: give a heading as the book "
                             f"writes it (e.g. \"Chapter 12\", \"CHAPTER XII\") or a share (\"40%\")")
        return max(1, self.tokens[max(found)].sentence)


ROMAN = (("m", 1000), ("cm", 900), ("d", 500), ("cd", 400), ("c", 100), ("xc", 90), ("l", 50), ("xl", 40),
         ("x", 10), ("ix", 9), ("v", 5), ("iv", 4), ("i", 1))
NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
                "seventeen eighteen nineteen twenty").split()


def _number_forms(word: str) -> list[str]:
    """The other ways a book writes a chapter number: 12 -> xii, twelve; xii -> 12, twelve."""
    n = None
    if word.isdigit():
        n = int(word)
    elif word in NUMBER_WORDS:
        n = NUMBER_WORDS.index(word)
    elif re.fullmatch(r"[mdclxvi]+", word):
        n, rest = 0, word
        for sym, v in ROMAN:
            while rest.startswith(sym):
                n, rest = n + v, rest[len(sym):]
    if not n or n > 3999:
        return []
    roman, k = "", n
    for sym, v in ROMAN:
        while k >= v:
            roman, k = roman + sym, k - v
    return [f for f in (str(n), roman, NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else None) if f and f != word]


def span_head(tokens: list[Token], start: int, end: int) -> int:
    """The token of a span whose syntactic head lies outside it (a mention's head word)."""
    for i in range(start, end + 1):
        h = tokens[i].head
        if h < start or h > end or h == i:
            return i
    return end


def char_token(char_id: int) -> str:
    return f"CHAR_{char_id}"


def _redo(path: Path) -> str:
    """The repair of the book a damaged file belongs to, as `whoqa check` words it (whoqa.core.store.redo_book)."""
    from whoqa.core.store import redo_book  # (the store reads workspace records; a book needs it only here)
    return redo_book(Path(path).parent)


def _rows(path: Path, columns: list[str], strict: bool = True):
    """(line number, row) of a BookNLP table, its columns checked against its header. strict=False (a quick look,
    e.g. the page's summary): a short row is skipped and bytes that are not UTF-8 raise UnicodeDecodeError itself."""
    n = 1
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, None)
            if header is None or header[:len(columns)] != columns:
                raise BookFormatError(f"{path}: header {header} is not BookNLP's {columns}")
            for n, row in enumerate(reader, start=2):
                if len(row) < len(columns):
                    if not strict:
                        continue
                    raise BookFormatError(f"{path}: line {n} has {len(row)} columns, expected {len(columns)}")
                yield n, row
    except UnicodeDecodeError as e:  # bytes that are not UTF-8 (a damaged disk, an edit): the file named
        if not strict:
            raise
        raise BookFormatError(f"{path}: not valid UTF-8 after line {n} ({e.reason} at byte {e.start} of a block): "
                              f"{_redo(path)}") from None


_T = {name: i for i, name in enumerate(TOKEN_COLUMNS)}  # a .tokens column's place, by its header name
_TOKEN_FIELDS = tuple(_T[c] for c in ("paragraph_ID", "sentence_ID", "token_ID_within_document", "word", "lemma",
                                      "byte_onset", "byte_offset", "POS_tag", "fine_POS_tag", "dependency_relation",
                                      "syntactic_head_ID"))  # Token's fields in order


def read_tokens(path: Path) -> list[Token]:
    """A book's tokens: the one reader of a .tokens file (its columns by header name), with `token_summary`."""
    tokens = []
    par, sen, idx, word, lemma, on, off, pos, tag, dep, head = _TOKEN_FIELDS
    for n, r in _rows(path, TOKEN_COLUMNS):
        try:
            t = Token(int(r[par]), int(r[sen]), int(r[idx]), r[word], r[lemma], int(r[on]), int(r[off]), r[pos], r[tag],
                      r[dep], int(r[head]))
        except ValueError as e:
            raise BookFormatError(f"{path}: line {n}: {e}") from None
        if t.index != len(tokens):
            raise BookFormatError(f"{path}: line {n}: token id {t.index}, expected {len(tokens)}")
        tokens.append(t)
    return tokens


def token_summary(path: Path, first_words: int = 12) -> tuple[int, int, list[str]]:
    """(words, sentences, the first sentence's first words) of a .tokens file, read without making the book (the
    web page's summary): words are the tokens that are not punctuation. A short row is skipped; bytes that are not
    UTF-8 raise UnicodeDecodeError, a bad sentence id ValueError (the caller names the book)."""
    words = sentences = 0
    first: list[str] = []
    sentence, word, pos = _T["sentence_ID"], _T["word"], _T["POS_tag"]
    for _, cols in _rows(path, TOKEN_COLUMNS, strict=False):
        words += cols[pos] != "PUNCT"
        sentences = max(sentences, int(cols[sentence]) + 1)
        if cols[sentence] == "0" and len(first) < first_words:
            first.append(cols[word])
    return words, sentences, first


def read_entities(path: Path, n_tokens: int | None = None) -> list[Mention]:
    mentions = []
    for n, r in _rows(path, ENTITY_COLUMNS):
        try:
            m = Mention(int(r[1]), int(r[2]), int(r[0]), r[3], r[4], r[5])
        except ValueError as e:
            raise BookFormatError(f"{path}: line {n}: {e}") from None
        if m.end < m.start or (n_tokens is not None and m.end >= n_tokens):
            raise BookFormatError(f"{path}: line {n}: span {m.start}-{m.end} outside the book's {n_tokens} tokens")
        mentions.append(m)
    mentions.sort(key=lambda m: (m.start, m.end))
    return mentions


def read_characters(path: Path) -> dict[int, Character]:
    try:
        data = read_json(path, "", dict)
    except DamagedArtifact as e:
        raise BookFormatError(f"{path}: {e.problem}: {_redo(path)}") from None
    chars = {}
    for c in data.get("characters", []):
        proper = [m["n"] for m in c.get("mentions", {}).get("proper", [])]
        g = c.get("g")
        gender = GENDERS.get(g.get("argmax")) if isinstance(g, dict) else None
        cid = int(c["id"])
        name = proper[0] if proper else ("NARRATOR" if cid == 0 else char_token(cid))
        chars[cid] = Character(cid, name, proper, int(c.get("count", 0)), gender)
    return chars


def write_book_files(folder: Path, book_id: str, token_rows: list[list], entity_rows: list[list], book: dict) -> None:
    """Write the three files; `.book` goes last, so its presence marks a finished book."""
    def tsv(header, rows):
        return "\n".join(["\t".join(header)] + ["\t".join(str(x) for x in r) for r in rows]) + "\n"
    folder = Path(folder)
    atomic_write(folder / f"{book_id}.tokens", tsv(TOKEN_COLUMNS, token_rows))
    atomic_write(folder / f"{book_id}.entities", tsv(ENTITY_COLUMNS, entity_rows))
    atomic_write(folder / f"{book_id}.book", json.dumps(book))


def is_done(folder: Path, book_id: str) -> bool:
    return all((Path(folder) / f"{book_id}{s}").is_file() for s in SUFFIXES)


_SPACE_BEFORE = re.compile(r" (?=[,.;:!?)\]}]|n't|'s|'re|'ve|'ll|'d|'m)")


def detokenize(words: list[str]) -> str:
    return _SPACE_BEFORE.sub("", " ".join(words))


def window_text(book: Book, first: int, last: int, without: int | None = None) -> str:
    """Sentences first..last as one passage (the text a reader or a ranker reads); `without` leaves one out, as
    ICT's pseudo-question is left out of its own passage."""
    return detokenize([w for s in range(first, last + 1) if s != without for w in book.sentence_words(s)])
