"""A question read once. Every layer that needs something of a question (routing its kind, retrieval its words and the
characters it names, the ranker its names and its syntax, the prompt its text, grounding the words it already holds)
reads it from a `Query`; none parses the question string again.

    Query.read(text)          what needs no book: the kind (routing reads it before the book opens), the syntax frame
    Query.ask(text)           the same, for a person's question: checked first (empty, too long, not valid text)
    query.about(aliases)      the same question in a book: its name spans, and BM25F's two fields
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property

from whoqa.core.names import NameSpan, name_spans, named_characters, unknown_names
from whoqa.core.questions import QuestionKind, question_kind
from whoqa.core.words import QUESTION_STOPWORDS, answer_tokens, content_words, terms


REFLEXIVE = re.compile(r"\b(himself|herself|themselves|itself|oneself)\b", re.I)


@dataclass(frozen=True)
class Query:
    text: str
    kind: QuestionKind
    spans: tuple[NameSpan, ...] | None = None  # its capitalised spans with the book's characters each names (`about`)

    @classmethod
    def read(cls, text: str) -> Query:
        return cls(text, question_kind(text))

    @classmethod
    def ask(cls, text: str | Query) -> Query:
        """A person's question, checked (`check_question`) and read; a Query is read already."""
        return text if isinstance(text, Query) else cls.read(check_question(text))

    def about(self, aliases) -> Query:
        """The question in a book (`aliases`: its AliasIndex, or its characters): the names it holds resolved."""
        return replace(self, spans=tuple(name_spans(self.text, aliases)))

    @property
    def word(self) -> str:
        """Its wh-word (what the readers are routed by), else "other"."""
        return self.kind.word

    @cached_property
    def fields(self) -> tuple[str, str]:
        """BM25F's (words, character ids) of the question: the spans that name a character become its id, and
        their words are taken out of the text."""
        chars: list[str] = []
        words = self.text
        for s in self._spans:
            if s.ids:
                chars += [f"char_{c}" for c in s.ids]
                words = words.replace(s.text, " ", 1)
        return " ".join(words.split()), " ".join(chars)

    @property
    def words(self) -> str:
        return self.fields[0]

    @property
    def characters(self) -> str:
        return self.fields[1]

    @cached_property
    def content(self) -> str:
        """Its content words, the character names out: what the passages of an other question are searched by."""
        return content_words(self.words)

    @cached_property
    def probe(self) -> str:
        """The words whose match says a sentence is about the question (question words out): none matched, and no
        character named, there is nothing to answer from."""
        return " ".join(w for w in re.findall(r"[^\W_]+", self.words) if w.lower() not in QUESTION_STOPWORDS)

    @property
    def reflexive(self) -> bool:
        """Whether it asks who did something to themselves ("Who does Glenister blame himself for?"): then the person
        it names may be the answer."""
        return bool(REFLEXIVE.search(self.text))

    @property
    def named(self) -> set[int]:
        """The characters it names."""
        return named_characters(list(self._spans))

    @property
    def unknown(self) -> list[str]:
        """The names it holds that no character of the book has."""
        return unknown_names(list(self._spans))

    @cached_property
    def asked(self) -> frozenset[str]:
        """Its tokens as answers are matched (an answer's words that only repeat the question hold nothing)."""
        return frozenset(answer_tokens(self.text))

    @cached_property
    def terms(self) -> frozenset[str]:
        """Its words, a few framing words out: the evidence sentences that share most of them come first."""
        return frozenset(terms(self.text))

    @cached_property
    def frame(self):
        """What a Who question asks of its answer: the verbs "who" hangs from and its role (whoqa.core.syntax; spaCy
        parses it the first time it is read)."""
        from whoqa.core.syntax import question_frame
        return question_frame(self.text)

    @property
    def _spans(self) -> tuple[NameSpan, ...]:
        if self.spans is None:
            raise ValueError("the query is not read in a book yet: Query.about(aliases) first")
        return self.spans


def check_question(question: str) -> str:
    """The question stripped; an empty one, one too long or one that is not valid text is a one-line ValueError (a
    byte a terminal passed that is not UTF-8, kept by Python as a surrogate, named as that byte)."""
    question = (question or "").strip()
    if not question:
        raise ValueError("the question is empty: ask about the book, e.g. \"Who is the hero?\" or \"Where does "
                         "the story end?\"")
    if len(question) > 500:
        raise ValueError("the question is longer than 500 characters: ask one question")
    bad = [ch for ch in question if "\ud800" <= ch <= "\udfff"]
    if bad and all("\udc80" <= ch <= "\udcff" for ch in bad):  # a command line's bytes that were not UTF-8
        raw = "".join(f"\\x{ord(ch) - 0xDC00:02x}" for ch in dict.fromkeys(bad))
        raise ValueError(f"the question holds a byte that is not valid UTF-8 ({raw}): type it again, or set your "
                         f"terminal to UTF-8")
    if bad:
        raise ValueError("the question holds a character that is not valid text (a lone surrogate): type it "
                         "again")
    return question
