"""The readers' questions (data_prep/readers): ten novels, 8 Who and 8 other questions each, every answer's line the
book's own, split by book into a fit half and a check half fixed once; and how an answer is judged."""
from collections import Counter

import pytest

from whoqa.core.errors import DataError
from whoqa.evaluation.readers import (SPLIT, load_questions, load_split, name_words, other_right, who_rank)

QUESTIONS = SPLIT.parent / "questions.tsv"


def test_ten_novels_of_sixteen_questions_split_five_and_five_by_book():
    rows = load_questions(QUESTIONS)
    per = Counter((q.book, q.kind) for q in rows)
    books = {b for b, _ in per}
    assert len(books) == 10 and set(per.values()) == {8}
    split = load_split()
    assert set(split) == books and Counter(split.values()) == {"fit": 5, "check": 5}
    for q in rows:
        if q.kind == "who":  # a name to match: a title or "the judge" alone matches nobody
            assert any(name_words(a) for a in q.answers), q.question


def test_every_answer_line_is_the_books_own(shared_data):
    books = shared_data / "books-unlabeled"
    for q in load_questions(QUESTIONS):
        lines = (books / f"{q.book}.txt").read_text(encoding="utf-8-sig").splitlines()
        assert lines[q.line - 1].replace("\t", " ").strip() == q.evidence.strip(), (q.question, q.line)


def test_a_damaged_split_is_one_line_and_a_missing_one_is_empty(tmp_path):
    assert load_split(tmp_path / "none.tsv") == {}
    bad = tmp_path / "split.tsv"
    bad.write_text("abc\tfit\ndef\tmaybe\n")
    with pytest.raises(DataError, match="line 2 is not 'book<TAB>fit|check'"):
        load_split(bad)


def test_answers_are_judged_by_name_words_and_content_words():
    assert who_rank(["Helen Chester", "Sir Henry Curtis"], ["Curtis", "Sir Henry"]) == 2
    assert who_rank(["Mrs. Challenger"], ["Mr. Malone"]) is None  # titles are not name words
    assert other_right("He died of a gunshot wound", ["dies from a gunshot"]) and not other_right("", ["x"])


def test_eval_questions_takes_one_half_and_one_kind(tmp_path):
    from whoqa.evaluation.readers import evaluate_readers_questions
    with pytest.raises(ValueError, match="--half 'middle'"):
        evaluate_readers_questions(tmp_path / "ws", QUESTIONS, tmp_path, half="middle")
    with pytest.raises(ValueError, match="--question-kinds 'why'"):
        evaluate_readers_questions(tmp_path / "ws", QUESTIONS, tmp_path, half="check", kinds="why")
