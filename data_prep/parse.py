"""spaCy parsing of a book into BookNLP-style tokens: sentences, POS, lemmas, dependencies and NER, in batches."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from whoqa.core.book import Token
from whoqa.core.lexicon import MAX_CHUNK

_PARAGRAPH = re.compile(r"\n[ \t]*\n")


@dataclass
class Entity:
    start: int  # document token ids, end inclusive
    end: int
    label: str  # spaCy NER label


@dataclass
class Parsed:
    tokens: list[Token]
    entities: list[Entity]


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(character offset, text) of each paragraph, newlines and tabs turned to spaces so offsets stay exact."""
    out = []
    pos = 0
    for m in list(_PARAGRAPH.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        chunk = text[pos:end]
        if chunk.strip():
            for off, piece in _split_long(chunk):
                out.append((pos + off, piece.replace("\n", " ").replace("\t", " ")))
        pos = m.end() if m else len(text)
    return out


def _split_long(chunk: str) -> Iterable[tuple[int, str]]:
    start = 0
    while len(chunk) - start > MAX_CHUNK:
        cut = chunk.rfind("\n", start, start + MAX_CHUNK)
        if cut <= start:
            cut = chunk.rfind(" ", start, start + MAX_CHUNK)
        if cut <= start:
            cut = start + MAX_CHUNK
        yield start, chunk[start:cut]
        start = cut
    yield start, chunk[start:]


def parse_text(nlp, text: str, batch_size: int = 128, progress=None) -> Parsed:
    """Parse a story body paragraph by paragraph (a paragraph always ends a sentence), in this process
    (data_prep.parse_pool.parse_book: across processes, the same result)."""
    return parse_paragraphs(nlp, paragraphs(text), 0, batch_size, progress)


def parse_paragraphs(nlp, paras: list[tuple[int, str]], first: int, batch_size: int, progress=None) -> Parsed:
    """Paragraphs `first`, `first` + 1, ... of a book parsed in this process: token and sentence ids count from 0
    (data_prep.parse_pool shifts a later batch's), paragraph ids and character offsets are the book's."""
    docs = nlp.pipe((p for _, p in paras), batch_size=batch_size)
    return _collect(((first + k, off, doc) for k, ((off, _), doc) in enumerate(zip(paras, docs))), progress)


def parse_sentences(nlp, sentences: list[list[str]], batch_size: int = 64) -> Parsed:
    """Parse pre-tokenised sentences (LitBank) keeping their tokens and sentence breaks: one Doc per sentence."""
    from spacy.tokens import Doc
    docs = nlp.pipe((Doc(nlp.vocab, words=s) for s in sentences), batch_size=batch_size)
    offsets, pos = [], 0
    for s in sentences:
        offsets.append(pos)
        pos += sum(len(w) + 1 for w in s)
    return _collect(((pid, off, doc) for pid, off, doc in zip(_dialogue_paragraphs(sentences), offsets, docs)),
                    None, keep_space=True)


def _dialogue_paragraphs(sentences: list[list[str]]) -> list[int]:
    """Paragraph ids for text that lost its paragraphs (LitBank): a sentence that opens a quotation right after
    one that closed a quotation starts a new paragraph (a new turn); after narration it continues the paragraph."""
    ids, pid, open_quote = [], 0, False
    quotes = ("\u201c", "\u201d", '"', "``", "''")
    for k, s in enumerate(sentences):
        if k and s and s[0] in ("\u201c", '"', "``") and not open_quote and sentences[k - 1] \
                and sentences[k - 1][-1] in quotes:
            pid += 1
        ids.append(pid)
        for w in s:
            if w in ("\u201c", "``") or (w == '"' and not open_quote):
                open_quote = True
            elif w in ("\u201d", "''", '"'):
                open_quote = False
    return ids


def _collect(items, progress, keep_space: bool = False) -> Parsed:
    tokens: list[Token] = []
    entities: list[Entity] = []
    sid = 0
    for pid, offset, doc in items:
        ids = {}
        for t in doc:
            if keep_space or not t.is_space:
                ids[t.i] = len(tokens) + len(ids)
        for sent in doc.sents:
            widx = 0
            for t in sent:
                if t.i not in ids:
                    continue
                i = ids[t.i]
                head = ids.get(t.head.i, i)
                tokens.append(Token(pid, sid, i, t.text, t.lemma_, offset + t.idx, offset + t.idx + len(t.text),
                                    t.pos_, t.tag_, t.dep_, head))
                widx += 1
            if widx:
                sid += 1
        for e in doc.ents:
            span = [ids[t.i] for t in e if t.i in ids]
            if span:
                entities.append(Entity(span[0], span[-1], e.label_))
        if progress is not None:
            progress(len(doc))
    return Parsed(tokens, entities)
