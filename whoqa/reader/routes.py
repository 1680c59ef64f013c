"""Which reader answers each kind of question: per question word (what / why / where ...), the reader with the best
ROUGE-L on the questions of other books.

Readers differ by kind of question: the trained bert2bert guesses NarrativeQA's short "what" and "who" phrases from
the question alone, an LLM reading the passages writes out "why" and "how" answers. One reader for every question
leaves that on the table. The choice is nested: the reader that answers a book's questions of a kind is chosen on
the other book folds' questions of that kind only, so the routed score is what a new book would get; the choice
made on every book is what serves (`served`), where it gained out of fold (the rule and the service's table:
whoqa.service.routing).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.files import atomic_write
from whoqa.core.folds import book_folds
from whoqa.core.questions import question_kind
from whoqa.core.metrics import normalize_text, paired_book_bootstrap, rouge_l
from whoqa.core.seed import SEED

PASSAGELESS = ("none",)  # contexts of readers that read no passage of the book asked about


def reads_the_book(context: str | None) -> bool:
    """Whether a reader of this context reads the passages of the book it is asked about. One that does not (e.g.
    fid[none], fid[none]+lookup: the question alone, prereading and lookup of other books) was measured on book folds
    of the workspace's own books, where NarrativeQA's questions and answers repeat their phrasing: that score holds
    for books like those only, so such a reader is served only for the workspace's training books."""
    return (context or "bm25f") not in PASSAGELESS


def question_word(question: str) -> str:
    """The question's wh-word, else "other" (whoqa.core.questions.question_kind)."""
    return question_kind(question).word


@dataclass
class RouteConfig:
    folds: int = 10  # book folds: the choice for a fold's books is made on the others' questions
    seed: int = SEED  # the books' assignment to folds
    min_questions: int = 10  # fewer training questions of a word: it keeps the default reader


@dataclass
class WordRoutes:
    answers: dict[int, str]  # question id -> the routed answer (its fold's choice)
    by: dict[int, str]  # question id -> the reader that answered it
    folds: list[dict[str, str]]  # per book fold: question word -> the reader chosen on the other folds
    served: dict[str, str]  # question word -> the reader chosen on every book (what serves a new book)
    scores: dict[str, dict[str, float]]  # question word -> reader -> ROUGE-L on every book's questions of that word
    default: str  # the reader for words with too few questions (the best over all questions)
    overall: dict[str, float] = field(default_factory=dict)  # reader -> ROUGE-L over every routed question
    paired: dict = field(default_factory=dict)  # routed - default, resampled by book (ROUGE-L)


def per_question_rouge(answers: dict[int, str], refs: dict[int, list[str]]) -> dict[int, float]:
    """question id -> ROUGE-L x 100 (nlg-eval's, as text_metrics; its mean is the row's ROUGE-L)."""
    return {q: 100 * rouge_l(normalize_text(a), [normalize_text(r) for r in refs[q]]) for q, a in answers.items()
            if q in refs}


def _best(scores: dict[str, dict[int, float]], questions: list[int], default: str, min_questions: int) -> str:
    """The reader with the best mean ROUGE-L on `questions` (ties and too few questions: the default)."""
    if len(questions) < min_questions:
        return default
    means = {r: sum(s[q] for q in questions) / len(questions) for r, s in scores.items()}
    return max(sorted(means), key=lambda r: (means[r], r == default))


def route_by_word(readers: dict[str, dict[int, str]], refs: dict[int, list[str]], words: dict[int, str],
                  books: dict[int, str], cfg: RouteConfig | None = None) -> WordRoutes:
    """Route the questions every reader answered (readers: name -> question id -> answer) by question word, each
    book fold by a choice made on the other folds."""
    cfg = cfg or RouteConfig()
    if not readers:
        raise ValueError("no reader to route questions to")
    ids = sorted(set.intersection(*(set(a) for a in readers.values())) & set(refs))
    scores = {r: per_question_rouge({q: a[q] for q in ids}, refs) for r, a in readers.items()}
    default = max(sorted(scores), key=lambda r: sum(scores[r].values()))
    kinds = sorted({words[q] for q in ids})
    of_word = {w: [q for q in ids if words[q] == w] for w in kinds}
    answers, by, chosen = {}, {}, []
    every = sorted({books[q] for q in ids})
    for fold in book_folds(every, min(cfg.folds, len(every)), cfg.seed):
        held = set(fold)
        choice = {w: _best(scores, [q for q in qs if books[q] not in held], default, cfg.min_questions)
                  for w, qs in of_word.items()}
        chosen.append(choice)
        for q in ids:
            if books[q] in held:
                by[q] = choice[words[q]]
                answers[q] = readers[by[q]][q]
    served = {w: _best(scores, qs, default, cfg.min_questions) for w, qs in of_word.items()}
    by_word = {w: {r: round(sum(scores[r][q] for q in qs) / len(qs), 2) for r in sorted(scores)}
               for w, qs in of_word.items()}
    paired = paired_book_bootstrap([scores[by[q]][q] for q in ids], [scores[default][q] for q in ids],
                                   [books[q] for q in ids], ("rouge_l",)) if ids else {}
    overall = {r: round(sum(s.values()) / max(1, len(s)), 2) for r, s in scores.items()}
    return WordRoutes(answers, by, chosen, served, by_word, default, overall, paired)


def gain(paired: dict) -> float:
    """Routed - default ROUGE-L out of fold (0 without a measurement)."""
    return paired.get("difference", {}).get("rouge_l", {}).get("mean", 0.0)


ROUTES_FILE = "reader_routes.json"  # under WS/results/: what `whoqa eval` chose on every book (whoqa.service.routing reads it)


def write_routes(results: Path, routes: WordRoutes | None, readers: dict[str, dict], provenance: dict) -> None:
    """Record the served choice (readers: name -> {"kind": "fid" | "llm", "model": ...}); without routes, drop an
    earlier record so no stale choice serves."""
    path = Path(results) / ROUTES_FILE
    if routes is None:
        path.unlink(missing_ok=True)
        return
    atomic_write(path, json.dumps({"served": routes.served, "default": routes.default, "rouge_l": routes.overall,
                                   "rouge_l_by_word": routes.scores, "readers": readers,
                                   "paired_vs_default": routes.paired, **provenance}, indent=1))
