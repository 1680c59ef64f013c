"""Routing questions to readers by question word (whoqa.reader.routes): the choice for a book's questions is made on
the other books' questions only."""
import pytest

from whoqa.reader.routes import RouteConfig, question_word, route_by_word

RIGHT, WRONG = "the old mill", "a green umbrella"


def corpus(books: int, words: dict[str, str]):
    """Two questions per word per book; words: question word -> the reader that knows its answers ("a" or "b")."""
    refs, kinds, where, a, b = {}, {}, {}, {}, {}
    q = 0
    for d in range(books):
        for w, knower in words.items():
            for _ in range(2):
                refs[q], kinds[q], where[q] = [RIGHT], w, f"book{d}"
                a[q], b[q] = (RIGHT, WRONG) if knower == "a" else (WRONG, RIGHT)
                q += 1
    return refs, kinds, where, {"a": a, "b": b}


def test_question_words():
    assert question_word("Why does Helen leave?") == question_word("And why does she?") == "why"
    assert question_word("In which town is it set?") == "which" and question_word("Name the dog.") == "other"


def test_each_word_goes_to_the_reader_that_answers_it():
    refs, kinds, books, readers = corpus(12, {"what": "a", "why": "b", "where": "b"})
    r = route_by_word(readers, refs, kinds, books, RouteConfig(folds=4, min_questions=2))
    assert r.served == {"what": "a", "where": "b", "why": "b"} and r.default == "b"  # b answers 2 words of 3
    assert all(r.answers[q] == RIGHT for q in refs) and all(f == r.served for f in r.folds)
    assert r.scores["what"] == {"a": 100.0, "b": 0.0}
    d = r.paired["difference"]["rouge_l"]  # routed 100 on every question, the default b 66.7
    assert d["mean"] == pytest.approx(100 / 3, abs=1e-3) and d["sd"] == 0 and r.paired["books"] == 12


def test_a_books_questions_are_routed_by_the_other_books_choice():
    """"where" is asked in two books only, a knows one's answers and b the other's: each book gets the reader the
    other book chose, so both are answered wrongly (a choice that saw the held-out book would answer one right)."""
    refs, kinds, books, readers = corpus(10, {"what": "a"})
    for d, knower in ((0, "a"), (1, "b")):
        for k in range(2):
            q = 1000 + 2 * d + k
            refs[q], kinds[q], books[q] = [RIGHT], "where", f"book{d}"
            readers["a"][q], readers["b"][q] = (RIGHT, WRONG) if knower == "a" else (WRONG, RIGHT)
    r = route_by_word(readers, refs, kinds, books, RouteConfig(folds=10, min_questions=1))
    assert {r.by[q] for q in (1000, 1001)} == {"b"} and {r.by[q] for q in (1002, 1003)} == {"a"}
    assert all(r.answers[q] == WRONG for q in range(1000, 1004))
    assert all(r.answers[q] == RIGHT for q in refs if kinds[q] == "what")


def test_too_few_questions_keep_the_default_and_only_shared_questions_are_routed():
    refs, kinds, books, readers = corpus(6, {"what": "a", "when": "b"})
    readers["a"][999] = RIGHT  # answered by one reader only: not routed
    refs[999], kinds[999], books[999] = [RIGHT], "what", "book0"
    r = route_by_word(readers, refs, kinds, books, RouteConfig(folds=3, min_questions=100))
    assert set(r.served.values()) == {r.default} and 999 not in r.answers and len(r.answers) == len(refs) - 1
    with pytest.raises(ValueError, match="no reader"):
        route_by_word({}, refs, kinds, books)


def test_the_served_reader_is_the_words_choice_only_where_routing_gained_out_of_fold(tmp_path):
    from whoqa.core.artifacts import read_cache
    from whoqa.reader.routes import ROUTES_FILE, write_routes
    from whoqa.service.routing import served_from

    def served_reader(results, question):  # the record as the routing table reads it, for the question's word
        return served_from(read_cache(results / ROUTES_FILE, dict), question.split()[0].lower())
    assert served_reader(tmp_path, "What is it?") is None  # no record: the service's other rules decide
    refs, kinds, books, readers = corpus(12, {"what": "a", "why": "b", "where": "b"})
    r = route_by_word(readers, refs, kinds, books, RouteConfig(folds=4, min_questions=2))
    record = {"a": {"kind": "llm", "model": "m"}, "b": {"kind": "fid", "context": "none"}}
    write_routes(tmp_path, r, record, {})
    name, rec, why = served_reader(tmp_path, "What is it?")
    assert (name, rec) == ("a", record["a"]) and "'what' questions go to a" in why and "b's 0.00" in why
    r.paired["difference"]["rouge_l"]["mean"] = -0.5  # as if the words' choices had lost on held-out books
    write_routes(tmp_path, r, record, {})
    name, _, why = served_reader(tmp_path, "What is it?")
    assert name == "b" and "gained -0.50 out of fold" in why
    (tmp_path / "reader_routes.json").write_text('{"served": ["what"]}')  # another shape: not trusted
    assert served_reader(tmp_path, "What is it?") is None
    (tmp_path / "reader_routes.json").write_text('{"served": {"what": "a"}, "default": "b"}')  # fields missing
    assert served_reader(tmp_path, "What is it?")[0] == "b"  # no measured gain: the default, never a crash
    write_routes(tmp_path, None, record, {})  # fewer than two readers now: no stale choice serves
    assert served_reader(tmp_path, "What is it?") is None


def test_a_service_reads_its_routing_table_once_until_the_measurements_change(tmp_path, monkeypatch):
    """The routing state (the word routes `whoqa eval` wrote, the installed LLM, the models' scores) is read once per
    Service and again only when a file it comes from changes; the full task's replay and the table share one rule."""
    import os
    from whoqa.reader.routes import write_routes
    from whoqa.service import Service, ServiceConfig
    from whoqa.service import routing
    calls = []
    monkeypatch.setattr(routing, "installed_llm", lambda wanted=None: calls.append(wanted) or None)
    svc = Service(tmp_path, ServiceConfig())
    table = svc.models.routes()
    assert table.llm is None and table.llm is None and svc.models.routes() is table and calls == [None]
    assert table.words() is None and svc.models.routes() is table
    refs, kinds, books, readers = corpus(12, {"what": "a", "why": "b", "where": "b"})
    r = route_by_word(readers, refs, kinds, books, RouteConfig(folds=4, min_questions=2))
    (tmp_path / "results").mkdir()
    write_routes(tmp_path / "results", r, {"a": {"kind": "llm", "model": "m"}, "b": {"kind": "fid"}}, {})
    again = svc.models.routes()
    assert again is not table and again.words()["served"] == r.served and svc.models.routes() is again
    path = tmp_path / "results" / "reader_routes.json"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))  # rewritten: read again
    assert svc.models.routes() is not again
    assert routing.by_word_serves(r.paired) == (r.paired["difference"]["rouge_l"]["mean"] > 0)
