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


def test_readers_questions_are_written_as_they_come_and_an_interrupted_run_resumes(shared_data, tmp_path,
                                                                                   tiny_llm_path, monkeypatch):
    """Each answer is one line of WS/served/readers-<key>.jsonl as it comes: a run killed mid-way (a native crash of
    the reader) answers only what it had not kept; another reader keys another file."""
    from tests.conftest import DYING_DETECTIVE
    from whoqa.evaluation.readers import evaluate_readers_questions
    from whoqa.service import Service
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / f"{DYING_DETECTIVE}.txt").write_text(
        (shared_data / "books" / f"{DYING_DETECTIVE}.txt").read_text(encoding="utf-8-sig"), encoding="utf-8")
    tsv = tmp_path / "q.tsv"
    tsv.write_text("".join(f"{DYING_DETECTIVE}\t{kind}\t{q}\t{a}\t1\tx\n" for kind, q, a in [
        ("who", "Who pretends to be dying?", "Holmes"), ("other", "What is in the ivory box?", "a spring"),
        ("who", "Who is the narrator?", "Watson")]))
    ws = tmp_path / "ws"
    first = evaluate_readers_questions(ws, tsv, tmp_path / "books", llm=tiny_llm_path, device="cpu", progress=False)
    cache, = (ws / "served").glob("readers-*.jsonl")
    lines = cache.read_text().splitlines()
    assert len(lines) == 3 and [r["question"] for r in first["rows"]][0] == "Who pretends to be dying?"
    cache.write_text("\n".join(lines[:1]) + "\n" + lines[1][:20])  # killed while writing the second answer
    asked = []
    real = Service.answer
    monkeypatch.setattr(Service, "answer", lambda self, book, q, *a, **k: asked.append(q) or real(self, book, q, *a, **k))
    again = evaluate_readers_questions(ws, tsv, tmp_path / "books", llm=tiny_llm_path, device="cpu", progress=False)
    assert asked == ["What is in the ivory box?", "Who is the narrator?"]
    assert [r["rank"] for r in again["rows"] if r["kind"] == "who"] == [r["rank"] for r in first["rows"]
                                                                        if r["kind"] == "who"]
