"""Short answers from an LLM that answers in sentences: NarrativeQA's answers are phrases of 4-5 words, mostly the
book's own words, and ROUGE-L pays for every extra word.

SHORTENERS (chosen by name, `LLMConfig.shorten`; `reader llm` reports every one on the same answers, since
each is a function of the answer and the passages it read, so no model call is repeated):

    none     the answer as the model gave it (its first line, `clean_answer`)
    words<N> its first N words (a constrained length)
    span     the span of the passages it read (at most SPAN_WORDS words) that best matches the answer (ROUGE-L
             against it; the shortest of equals): the book's words for what the model meant
"""
from __future__ import annotations

import re
from typing import Callable

from whoqa.core.metrics import normalize_text, rouge_l

SPAN_WORDS = 12  # the longest span extracted (NarrativeQA's answers: 4-5 words on average, few over 12)
_WORDS = re.compile(r"words(\d+)")


def first_words(answer: str, n: int) -> str:
    return " ".join(answer.split()[:n])


def passage_span(answer: str, passages: list[str], max_words: int = SPAN_WORDS) -> str:
    """The span of the passages (within one passage, at most max_words words) with the best ROUGE-L against the
    answer, the shortest of equals, first in the passages among those; the answer itself when nothing matches."""
    target = normalize_text(answer)
    if not target or not passages:
        return answer
    wanted = {t for t in target.split() if any(ch.isalnum() for ch in t)}
    best, best_score = answer, 0.0
    for p in passages:
        words = p.split()
        norm = [normalize_text(w) for w in words]  # (a word may normalise to several tokens: "Maulger," -> maulger ,)
        hit = [any(t in wanted for t in n.split()) for n in norm]
        for i in range(len(words)):
            if not hit[i]:  # a best span starts and ends on a word of the answer
                continue
            for j in range(i, min(len(words), i + max_words)):
                if not hit[j]:
                    continue
                score = rouge_l(" ".join(x for x in norm[i:j + 1] if x), [target])
                if score > best_score + 1e-12 or (abs(score - best_score) <= 1e-12 and
                                                   j + 1 - i < len(best.split())):
                    best, best_score = " ".join(words[i:j + 1]).strip(" ,;:.!?"), score
    return best


def shortener(name: str) -> Callable[[str, list[str]], str]:
    """The shortening a name asks for: (answer, passages read) -> answer."""
    if name == "none":
        return lambda answer, passages: answer
    if name == "span":
        return passage_span
    m = _WORDS.fullmatch(name)
    if m and int(m.group(1)) > 0:
        return lambda answer, passages: first_words(answer, int(m.group(1)))
    raise ValueError(f"unknown answer shortening {name!r}: use none, span or words<N> (e.g. words5)")


SHORTENERS = ("none", "words5", "words8", "span")  # the ones `reader llm` reports side by side
