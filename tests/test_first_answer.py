"""The first answer of every kind on time (issue 64): the served passages ("pool") encode only the sentences a question's
BM25F search found, so no book is encoded whole; with the whole book's vectors ("rrf"), where the process lives on
(chat, the page), they are encoded in the background once the book is in, so the first question that is not a Who
question finds them made."""
from tests.test_any_book import STORY


def test_a_books_vectors_are_made_beside_its_first_answer_and_read_by_the_next(tmp_path, monkeypatch):
    from whoqa.retrieval import passages
    from whoqa.retrieval.passages import PassageConfig
    from whoqa.service import Service, ServiceConfig
    calls = []
    real = passages.encode
    monkeypatch.setattr(passages, "encode", lambda texts, *a, **k: calls.append(len(texts)) or real(texts, *a, **k))
    (tmp_path / "l.txt").write_text(STORY)
    svc = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm="none", passages=PassageConfig(fusion="rrf")))
    book = svc.intake(text=tmp_path / "l.txt")
    svc.vectors_later(book)  # (chat and the page's upload call it once the book is in)
    svc.answer(book, "Who rowed to the village for bread?")  # a Who answer, the vectors made beside it
    svc.books._encoding[book].result()
    assert svc.ws.book_vectors(book).is_file() and len(calls) == 1
    ob = svc.open(book)
    wins = svc.passages(ob, ob.query("Where did Tom row every morning?"))  # an other question's retrieval
    assert wins and calls[0] > 1 and calls[1:] == [1]  # the book's sentences not encoded again: only the question
    svc.vectors_later(book)
    assert book not in svc.books._encoding  # kept on disk: nothing begun twice


def test_the_served_passages_encode_only_what_a_question_found(tmp_path, monkeypatch):
    from whoqa.retrieval import passages
    from whoqa.service import Service, ServiceConfig
    calls = []
    real = passages.encode
    monkeypatch.setattr(passages, "encode", lambda texts, *a, **k: calls.append(len(texts)) or real(texts, *a, **k))
    (tmp_path / "l.txt").write_text(STORY)
    svc = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm="none"))
    assert svc.cfg.passages.fusion == "pool"
    book = svc.intake(text=tmp_path / "l.txt")
    svc.vectors_later(book)
    assert book not in svc.books._encoding and not calls  # nothing encoded in the background
    ob = svc.open(book)
    wins = svc.passages(ob, ob.query("Where did Tom row every morning?"))
    assert wins and not svc.ws.book_vectors(book).is_file()  # no whole-book vectors
    assert len(calls) == 1 and calls[0] < len(ob.book.sentences) + 1  # the question and BM25F's hits only
