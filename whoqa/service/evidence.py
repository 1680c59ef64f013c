"""Why a Who answer: the context sentences that mention its top character (by name or a resolved pronoun, marked),
those sharing the most of the question's words first, and the facts the feature ranker weighed, in a reader's
words."""
from __future__ import annotations

from whoqa.core.query import Query
from whoqa.core.words import terms
from whoqa.service.schema import Answer, Evidence, Ranked



def evidence_for(book, context: list[int], chars: list[Ranked], query: Query, n: int) -> list[Evidence]:
    """The context sentences that mention the top character (by name or a resolved pronoun), those sharing the
    most of the question's words first (ties: the context's order), its mentions marked."""
    if not chars:
        return []
    best = chars[0].id
    asked = query.terms
    found = []
    for rank_, s in enumerate(dict.fromkeys(context)):
        marks, text = sentence_marks(book, s, best)
        if marks:
            found.append((-len(asked & terms(text)), rank_, Evidence(s, text, marks)))
    return [e for *_, e in sorted(found, key=lambda x: x[:2])[:n]]


def who_reasons(book, context: list[int], chars: list[Ranked], named: set[int]) -> list[str]:
    """Why the top character, in a reader's words: the facts the feature ranker weighs (mentions near the question's
    words, its share of the book, the question naming it, the language model's pick), each as one clause."""
    if not chars:
        return []
    top = chars[0]
    near = sum(m.char_id == top.id for s in dict.fromkeys(context) for m in book.sentence_mentions(s))
    share = book.characters[top.id].count / max(1, sum(c.count for c in book.characters.values()))
    close = len(set(context))
    out = [f"{top.name} is mentioned {near} time{'s' * (near != 1)} in the {close} sentence{'s' * (close != 1)} "
           f"closest to your question" if close else "no sentence read shares a word with your question, so "
           "it goes by how often each character appears",
           f"{top.name} makes {share:.0%} of the mentions of people in the text read"]
    read = [c for c in chars if c.llm is not None]
    if read:
        pick = max(read, key=lambda c: c.llm)
        out.append(f"a language model that read those passages also picked {top.name}" if pick.id == top.id else
                   f"a language model that read those passages picked {pick.name}" + (
                       f", but the question names {pick.name}, and a question rarely asks about the one it names"
                       if pick.id in named else ""))
    passed = [c.name for c in chars[1:] if c.id in named]
    if passed and not read:
        out.append(f"the question names {', '.join(passed)}, and a question rarely asks about the one it names")
    return out


def sentence_marks(book, sid: int, char: int) -> tuple[list[tuple[int, int]], str]:
    """(offsets of `char`'s mentions, its cast's merged clusters' included, the sentence's text as the book spaces
    it: Book.sentence_text)."""
    from whoqa.ranker.cast import cast_of
    first, _ = book.sentences[sid]
    text, starts = book.sentence_text(sid)
    person = cast_of(book).of
    marks = [(starts[m.start - first], starts[m.end - first] + len(book.tokens[m.end].word))
             for m in book.sentence_mentions(sid) if m.char_id == char or person(m.char_id) == char]
    return marks, text



def written_lead(book, written, chars: list[Ranked]) -> Evidence | None:
    """The passage sentence the reader's written answer came from, to show first where it names (or resolves to)
    the top character: the event, not the sentence with most mentions."""
    if written.sentence is None or not chars or written.answer != chars[0].id:
        return None
    marks, text = sentence_marks(book, written.sentence, chars[0].id)
    return Evidence(written.sentence, text, marks)


def written_reasons(book, written, chars: list[Ranked]) -> list[str]:
    """What the reader wrote, in plain words: whom it named, or that what it wrote names no character of the book."""
    if not written.text:
        return []
    if written.answer is None:
        if written.named_passed:
            return [f"a language model that read the passages wrote {written.text!r}, the person the question names, "
                    f"so the counts decide"]
        return ["a language model that read the passages wrote an answer that names no one in the book, so the "
                "counts decide"]
    name = book.characters[written.answer].name if written.answer in book.characters else "?"
    agree = bool(chars) and chars[0].id == written.answer
    return [f"a language model that read the passages wrote {written.text!r}"
            + (f", naming {name}" if agree else f", naming {name}, though the counts weigh against it")]


def who_warnings(query: Query) -> list[str]:
    """What the question says that the book does not: a name that is none of its characters'."""
    return [f"the question names {n!r}, who is not a character of this book" for n in query.unknown]
