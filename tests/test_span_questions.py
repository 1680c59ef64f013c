"""Artificial span questions (What/Where/When/Why) on real spaCy parses of sentences written for each rule."""
import random

import pytest

from data_prep.span_questions import SKIP_LONG, SKIP_NOT_A_PLACE, span_questions

INTRO = "Young Mr. Marriat met Miss Hermione Granger and Mr. Holmes at the station.\n\n"


@pytest.fixture(scope="module")
def made(parsed):
    def make(text):
        b = parsed(INTRO + text)
        qs, stats = span_questions(b)
        span = lambda q: " ".join(t.word for t in b.tokens[q["span"][0]:q["span"][1] + 1])  # noqa: E731
        return [(q["t"], span(q), q["k"]) for q in qs if q["s"] > 0], stats, b, qs
    return make


def test_what_where_when_why(made):
    qs = made("Marriat bought a small horse at the fair.")[0]
    assert ("What did Marriat buy at fair?", "a small horse", "what") in qs
    assert ("Where did Marriat buy a horse?", "at the fair", "where") in qs
    assert ("Why did Marriat weep?", "because his brother had left", "why") in \
        made("Marriat wept because his brother had left.")[0]
    assert ("When did Holmes open the door?", "When the bell rang", "when") in \
        made("When the bell rang, Holmes opened the door.")[0]


def test_auxiliary_negation_and_present_tense(made):
    qs = made("Holmes will not sell his violin. Hermione keeps a diary in the drawer.")[0]
    assert ("What will Holmes not sell?", "his violin", "what") in qs
    assert ("What does Hermione keep in drawer?", "a diary", "what") in qs
    assert ("Where does Hermione keep a diary?", "in the drawer", "where") in qs


def test_no_question_without_a_character_subject_or_with_a_character_answer(made):
    qs = made("The dog bought a bone at the market. Marriat thanked Hermione.")[0]
    assert qs == []  # the dog is no character; Hermione is a character, so a Who question's answer


def test_skips_non_places_and_long_answers(made):
    qs, stats, _, _ = made("Marriat spoke in a low voice. Holmes read the long letter that the old woman from the "
                           "village beyond the dark hills had written to him in her youth.")
    assert not [q for q in qs if q[2] == "where"] and stats[SKIP_NOT_A_PLACE] >= 1
    assert not [q for q in qs if q[0].startswith("What did Holmes read")] and stats[SKIP_LONG] >= 1


def test_lookup_example_answer_is_the_renamed_span(made):
    from whoqa.reader.config import LookupConfig
    from whoqa.reader.lookup import lookup_example
    text = "Marriat gave Hermione Granger's old book to Holmes. " * 1 + "It rained. " * 8
    _, _, book, rows = made(text)
    q = next(r for r in rows if r["k"] == "what")
    e = lookup_example(book, q, LookupConfig(passages=2), random.Random(0), 0, names=["Tom Thumb", "Ann Lee", "Bo"])
    assert e.answers[0] in e.passages[0] + e.passages[1]  # the span can be copied from its window
    assert "Granger" not in e.answers[0] and "Granger" not in e.question  # renamed everywhere
    assert e.question.startswith("What did ") and "Marriat" not in e.question
    assert sum(e.answers[0] in p for p in e.passages) == 1
