"""Which words say what a text is about: the function words that only hold a sentence together, the words a question
uses to frame the answer it wants, and the tokens answers and passages are matched by. One list for the question's
search (whoqa.core.query), the passages' grounding and the evaluation."""
from __future__ import annotations

import re

# Words that hold a sentence together, not what it is about (lowercase, Lucene's tokens).
FUNCTION_WORDS = frozenset("""
what whats which who whom whose where when why how whether
is are was were be been being am do does did done doing have has had having will would shall should can could
may might must ought get gets got getting
a an the this that these those there here then than so such very too also just only even ever
of to in on at by for with from into onto upon about above below over under after before during while until
through throughout between among against without within along across around toward towards off out up down
and or but nor not no yes if as because though although since unless whereas
i me my mine myself you your yours yourself he him his himself she her hers herself it its itself we us our ours
they them their theirs themselves one ones someone somebody something anyone anything everyone everything
many much more most some any all each every other another own same several
""".split())
# ... and, in a question, the words that only frame what kind of answer is wanted.
STOPWORDS = FUNCTION_WORDS | frozenset("name named kind type sort way happen happens happened happening story book "
                                       "novel play chapter end mr mrs ms dr".split())

# Words every question has that say nothing of the book (Lucene's English stopwords are dropped by its analyzer
# already; these are not among them): a sentence matching only "who" or "did" is no evidence for an answer.
QUESTION_STOPWORDS = frozenset("who whom whose what which where when why how do does did done has have had he she him "
                               "his her hers they them their i me my you your we us our one ones".split())


def content_words(text: str) -> str:
    """The words of `text` that say what it is about: stopwords and question words dropped (case kept)."""
    return " ".join(w for w in text.split() if w.strip("?!.,;:'\"()").lower().replace("'s", "") not in STOPWORDS
                    and any(c.isalnum() for c in w))


def answer_tokens(text: str) -> list[str]:
    """An answer's or a passage's tokens for matching (normalize_text's, lowercase): function words and punctuation
    dropped, unless nothing else is left (an answer of function words alone keeps its words)."""
    from whoqa.core.metrics import normalize_text
    tokens = [t for t in normalize_text(text).split() if t[0].isalnum()]
    content = [t for t in tokens if t not in FUNCTION_WORDS]
    return content or tokens


TERM = re.compile(r"[a-z]+")
# The words of a question that say nothing of the sentence that answers it, as a Who answer's evidence is ordered.
TERM_STOPWORDS = {"who", "whom", "whose", "what", "the", "a", "an", "of", "to", "in", "on", "at", "is", "was", "does",
                  "did", "do", "and", "or", "his", "her", "their", "he", "she", "they", "it", "for", "with", "by",
                  "from", "that", "be"}


def terms(text: str) -> set[str]:
    """A text's lowercase words, its few framing words out: what a Who answer's evidence sentences share with the
    question."""
    return set(TERM.findall(text.lower())) - TERM_STOPWORDS
