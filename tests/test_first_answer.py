"""The first answer of every kind on time (issue 64): where the process lives on (chat, the page), a book's sentence
vectors are encoded in the background once it is in, so the first question that is not a Who question finds them
made."""
from tests.test_any_book import STORY


def test_a_books_vectors_are_made_beside_its_first_answer_and_read_by_the_next(tmp_path, monkeypatch):
    from whoqa.retrieval import passages
    from whoqa.service import Service, ServiceConfig
    calls = []
    real = passages.encode
    monkeypatch.setattr(passages, "encode", lambda texts, *a, **k: calls.append(len(texts)) or real(texts, *a, **k))
    (tmp_path / "l.txt").write_text(STORY)
    svc = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm="none"))
    book = svc.intake(text=tmp_path / "l.txt")
    svc.vectors_later(book)  # (chat and the page's upload call it once the book is in)
    svc.answer(book, "Who rowed to the village for bread?")  # a Who answer, the vectors made beside it
    svc._encoding[book].result()
    assert svc.ws.book_vectors(book).is_file() and len(calls) == 1
    ob = svc.open(book)
    wins = svc.passages(ob, ob.query("Where did Tom row every morning?"))  # an other question's retrieval
    assert wins and calls[0] > 1 and calls[1:] == [1]  # the book's sentences not encoded again: only the question
    svc.vectors_later(book)
    assert book not in svc._encoding  # kept on disk: nothing begun twice
