"""Grounding a reader's answer in the passages it read: the sentences it rests on, or none.

A small LLM writes fluent answers whether or not the passages hold them ("from a heart attack" when no passage says
so). An answer is supported when some sentence of the passages holds it: the best ROUGE-L of the answer against a
span of a passage sentence (`best_span_rouge_l`, both as `answer_tokens`: function words and punctuation dropped;
the answer's words that only repeat the question's left out) reaches GroundingConfig.threshold. The threshold is
chosen on the training books' questions, where the ROUGE-L of answered questions against the share answered is
measured (docs/reader.md). An answer below it is withheld: whoqa says it did not find the
answer in the book and shows the best passages' sentences.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from whoqa.core.metrics import best_span_rouge_l
from whoqa.core.words import answer_tokens
from whoqa.retrieval.bm25f import Window, window_sentences

_WORD = re.compile(r"\w+")


@dataclass
class GroundingConfig:
    threshold: float = 0.4  # support an answer needs to be shown: the best separation of answered from withheld
    #                         ROUGE-L on 38 training-book questions (docs/reader.md: the coverage/ROUGE-L table)
    sentences: int = 3  # sentences shown as what the answer rests on (or, not found, as the best passages)
    second_look: bool = True  # not found: search the book with the question and the withheld answer, read once more
    #                           (whoqa.service.reading.second_look): on the 10 unseen books' 211 other questions "not
    #                           found" 64 -> 54, ROUGE-L counting it as empty +0.96 (95% +0.32 to +1.68), the answers
    #                           shown as good (22.43 against 22.57), 15 s more where it looks
    #                           (docs/reader.md)


@dataclass
class Ground:
    sentence: int  # the book's sentence id
    text: str  # as the book writes it ("don't", "Kelso's": `Book.sentence_text`)
    marks: list[tuple[int, int]]  # character offsets in text of the words it shares with the answer
    support: float  # best-span ROUGE-L of the answer in it (0..1)


def sentence_words_text(book, sid: int) -> str:
    first, last = book.sentences[sid]
    return " ".join(t.word for t in book.tokens[first:last])


def new_words(answer: str, asked: frozenset[str] = frozenset()) -> list[str]:
    """The answer's tokens that the question does not already hold (`asked`: its tokens, `Query.asked`; "Lisbeth" for
    "What is Lisbeth's nickname?" is no answer, and every passage about her would seem to hold it)."""
    return [t for t in answer_tokens(answer) if t not in asked]


def support(wanted: list[str], text: str) -> float:
    """How well one text holds the answer: the best ROUGE-L of the answer's new words (`new_words`) against a span of
    it (0..1)."""
    return best_span_rouge_l(wanted, answer_tokens(text))


def shared_marks(text: str, wanted: list[str]) -> list[tuple[int, int]]:
    """Offsets of the words of text that are also new content words of the answer (case and punctuation aside)."""
    wanted = set(wanted)
    return [(m.start(), m.end()) for m in _WORD.finditer(text) if m.group().lower() in wanted]


def ground(book, wins: list[Window], answer: str | None, cfg: GroundingConfig | None = None,
           asked: frozenset[str] = frozenset()) -> tuple[float, list[Ground]]:
    """(the answer's support: its best sentence's, the sentences to show): the passages' sentences (Windows, best
    first) that hold the answer's words best (those not already in the question), marked;
    with no answer or no support, the hit sentences of the best passages, so the reader sees what was found."""
    cfg = cfg or GroundingConfig()
    sids = window_sentences(wins)
    if not sids:
        return 0.0, []
    texts = {s: sentence_words_text(book, s) for s in sids}  # what support is measured on (the tokens)
    wanted = new_words(answer, asked) if answer else []  # (read once: every sentence is measured on them)

    def shown(s: int, sc: float) -> Ground:  # what the reader sees: the sentence as written, its shared words marked
        text = book.sentence_text(s)[0]
        return Ground(s, text, shared_marks(text, wanted), sc)
    if not answer or not answer.strip():
        return 0.0, [shown(s, 0.0) for s in sids[:cfg.sentences]]
    scored = [(support(wanted, texts[s]), -i, s) for i, s in enumerate(sids)]
    scored.sort(reverse=True)
    best = scored[0][0]
    if best < cfg.threshold:  # not found: what was read, best windows first
        return best, [shown(s, support(wanted, texts[s])) for s in _window_middles(wins, cfg.sentences)]
    return best, [shown(s, sc) for sc, _, s in scored[:cfg.sentences] if sc > 0]


def _window_middles(wins: list[Window], n: int) -> list[int]:
    """The middle sentence (the retrieval's hit) of each of the first n windows."""
    return [w.middle for w in wins[:n]]
