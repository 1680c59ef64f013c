"""Passages as a language model reads them: the book's words, or the words with the engine's coreference shown.

Why: whoqa resolves every "she", "I" and "the girl" to a character (the engine's mentions in `Book.mentions`); a
reader given the raw words has to redo that, and a 0.5B model cannot. A rendering shows it the resolution:

    raw        She smiled at him.
    annotate   She [Helen Chester] smiled at him [Roy Glenister].
    replace    Helen Chester smiled at Roy Glenister.

Only pronouns and nominals ("the girl") are marked: a proper mention already names its character (and one whose words
are not in the canonical name, "Mrs. Chester" for Helen Chester, is marked in `annotate` too). A character without a
proper name (the engine's CHAR_<id>) is never shown; the narrator is "the narrator". `candidates` limits the marks to
the characters a re-ranker is choosing among. `characters` lists the characters the passages mention, most mentioned
first, for the prompt's "Characters in the passages:" line.

Registry: RENDERINGS (name -> function); a config names one (`LLMConfig.rendering`, `RerankConfig.rendering`).
"""
from __future__ import annotations

from typing import Iterable

from whoqa.core.registry import Registry
from whoqa.core.book import POSSESSIVE_TAGS, Book, Mention
from whoqa.core.book import detokenize, window_text
from whoqa.core.workspace import Workspace
from whoqa.retrieval.bm25f import Window
from whoqa.retrieval.contexts import load_contexts

def _marked(book: Book, m: Mention, candidates: set[int] | None) -> str | None:
    """The name to show for a mention, or None where the mention already says it (or is not to be marked)."""
    if candidates is not None and m.char_id not in candidates:
        return None
    name = book.shown_name(m.char_id)
    if name is None:
        return None
    if m.prop == "PROP":
        words = set(name.lower().split())
        if all(w.lower().strip(".") in words or not w[:1].isalpha() for w in m.text.split()):
            return None
    return name


def _window_words(book: Book, first: int, last: int, mode: str, candidates: set[int] | None) -> list[str]:
    """The words of sentences first..last with marked mentions annotated ("she [Name]") or replaced ("Name")."""
    a, b = book.sentences[first][0], book.sentences[last][1]
    marks: dict[int, tuple[int, str]] = {}  # first token -> (last token, name)
    for s in range(first, last + 1):
        for m in book.sentence_mentions(s):
            name = _marked(book, m, candidates)
            if name is not None and (mode == "annotate" or m.prop != "PROP"):
                marks[m.start] = (min(m.end, b - 1), name)
    words: list[str] = []
    i = a
    while i < b:
        if i not in marks:
            words.append(book.tokens[i].word)
            i += 1
            continue
        end, name = marks[i]
        if mode == "annotate":
            words += [t.word for t in book.tokens[i:end + 1]] + [f"[{name}]"]
        else:
            possessive = end == i and book.tokens[i].tag in POSSESSIVE_TAGS
            words.append(name + ("'s" if possessive else ""))
        i = end + 1
    return words


def raw(book: Book, first: int, last: int, candidates: set[int] | None = None) -> str:
    return window_text(book, first, last)


def annotate(book: Book, first: int, last: int, candidates: set[int] | None = None) -> str:
    return detokenize(_window_words(book, first, last, "annotate", candidates))


def replace(book: Book, first: int, last: int, candidates: set[int] | None = None) -> str:
    return detokenize(_window_words(book, first, last, "replace", candidates))


RENDERINGS: Registry = Registry("passage rendering", {"raw": raw, "annotate": annotate, "replace": replace})


def check_rendering(name: str) -> None:
    RENDERINGS.check(name)


def render(book: Book, windows: Iterable[Window], rendering: str = "raw",
           candidates: Iterable[int] | None = None) -> list[str]:
    """Each window as text in the rendering; `candidates`: only their mentions marked."""
    check_rendering(rendering)
    only = set(candidates) if candidates is not None else None
    return [RENDERINGS[rendering](book, w.first, w.last, only) for w in windows]


def characters(book: Book, windows: Iterable[Window], candidates: Iterable[int] | None = None) -> list[str]:
    """The shown names of the characters mentioned in the windows (or only the candidates among them), most mentioned
    there first (ties by id)."""
    only = set(candidates) if candidates is not None else None
    count: dict[int, int] = {}
    for w in windows:
        for s in w.sentences:
            for m in book.sentence_mentions(s):
                if (only is None or m.char_id in only) and book.shown_name(m.char_id):
                    count[m.char_id] = count.get(m.char_id, 0) + 1
    return [book.shown_name(c) for c in sorted(count, key=lambda c: (-count[c], c))]


MARKS = Registry("marks", ("all", "candidates"))


def shown(book: Book, windows: list[Window], rendering: str = "raw", marks: str = "all",
          character_list: bool = False, candidates: Iterable[int] | None = None) -> tuple[list[str], list[str]]:
    """(passages, the prompt's character list) for windows of a book as a config asks: `rendering` (RENDERINGS),
    `marks` all characters' mentions or only the candidates', and the list of the characters they mention (empty
    unless `character_list`)."""
    MARKS.check(marks)
    only = list(candidates) if marks == "candidates" and candidates is not None else None
    return render(book, windows, rendering, only), (characters(book, windows, only) if character_list else [])


class WorkspacePassages:
    """A workspace's stored question windows (WS/contexts/<context>/) rendered: each book and its contexts read once.
    Why: the reader examples keep raw text only; a rendering needs the windows and the book's mentions."""

    def __init__(self, workspace, context: str = "bm25f"):
        self.ws, self.context, self.books = Workspace(workspace), context, {}

    def of(self, book_id: str, question_id: int, k: int, rendering: str = "raw", marks: str = "all",
           character_list: bool = False, candidates=None) -> tuple[list[str], list[int], list[str]]:
        """(passages, their first sentences, the character list) of a question's top-k windows."""
        if book_id not in self.books:
            self.books[book_id] = (Book.load(self.ws.books / book_id, book_id),
                                   load_contexts(self.ws, self.context, book_id) or {})
        book, ctx = self.books[book_id]
        wins = ctx.get(str(question_id), [])[:k]
        passages, listed = shown(book, wins, rendering, marks, character_list, candidates)
        return passages, [w.first for w in wins], listed
