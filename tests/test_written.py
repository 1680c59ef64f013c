"""A Who answer the reader writes, linked to the book's cast (issue 63): by the names it writes, a possessive's owner
and the question's own person passed over, and a description linked through the passage mention it describes."""
import pytest

from whoqa.core.aliases import AliasIndex
from whoqa.core.query import Query
from whoqa.ranker.cast import cast_of
from whoqa.ranker.written import link

STORY = ("Roy Glenister sailed north with Joe Dextry. On the ship Glenister met Helen Chester, and he loved Helen. "
         "Helen's uncle, Judge Stillman, hated Glenister. Judge Stillman said so. Mr. Glenister fought McNamara in "
         "the street. The peddler sold a gun to McNamara. Joe Dextry laughed at McNamara. Glenister thanked Joe "
         "Dextry. Judge Stillman ran.")


@pytest.fixture(scope="module")
def book(parsed):
    return parsed(STORY)


def _link(book, question, text):
    aliases = AliasIndex(book.characters)
    w = link(book, aliases, Query.read(question).about(aliases), text, list(range(len(book.sentences))))
    return w, [cast_of(book).names[r] for r in w.linked]


def test_names_link_in_order_and_the_questions_person_is_passed_over(book):
    w, names = _link(book, "Who does Glenister fall in love with?", "Glenister falls in love with Helen Chester")
    assert names[0].startswith("Helen") and w.how == "name"
    assert w.named_passed and cast_of(book).names[w.named_passed[0]].endswith("Glenister")
    assert "Helen" in book.sentence_text(w.sentence)[0]  # the sentence it came from names the answer
    _, names = _link(book, "Who fights McNamara?", "Mr. Glenister")  # a title and a surname: the full name
    assert names[0].endswith("Glenister")
    _, names = _link(book, "Who hates Glenister?", "Helen's uncle, Judge Stillman")
    assert names[0].endswith("Stillman")  # Helen owns the uncle; the uncle is the answer
    _, names = _link(book, "Whose uncle hates Glenister?", "Helen's uncle")
    assert names[0].startswith("Helen")  # a "Whose" question asks for the owner
    w, names = _link(book, "Who does Glenister thank?", "Glenister thanks himself")
    assert names == [] and w.answer is None  # the question's own person, not reflexive: no answer
    w, names = _link(book, "Who thanks himself?", "Glenister")
    assert names[0].endswith("Glenister")  # reflexive: it may be


def test_an_answer_naming_nobody_links_through_the_passage_or_stays_unlinked(book):
    w, names = _link(book, "Who sold a gun to McNamara?", "the peddler")
    assert w.answer is None and w.how == ""  # no character of the book: unlinked, and the caller says so
    w, names = _link(book, "Who laughed at McNamara?", "")
    assert w.answer is None
    w, names = _link(book, "Who ran?", "Judge Stillman's enemy")
    assert not any(n.endswith("Stillman") for n in names)  # the owner's title is not the description's person


def test_a_fit_that_reads_the_written_answer_gets_it_and_says_what_it_wrote(tmp_path, tiny_llm_path, monkeypatch):
    """Where the served fit weighs the written answer (issue 63), the Who route has the reader write it, from the
    passages the fit's written answers were read from (its prompt's "written_passages"), and links it: the answer's
    reasons say what it wrote, in plain words."""
    from dataclasses import replace
    from tests.test_any_book import STORY as LIGHTHOUSE
    from whoqa.ranker import fits
    from whoqa.ranker.features import SERVED, WRITTEN
    from whoqa.ranker.written import Written
    from whoqa.service import Service, ServiceConfig
    from whoqa.service.intake import Books
    shipped = fits.shipped_fit()
    r = shipped.ranker
    n = len(SERVED)
    reading = replace(shipped, ranker=replace(r, stage1=list(r.stage1) + [2.0, 0.5],
                                              stage2=list(r.stage2[:n]) + [1.0, 0.2] + list(r.stage2[n:]),
                                              features={"stage1": list(SERVED + WRITTEN),
                                                        "stage2": list(SERVED + WRITTEN) + r.features["stage2"][n:]},
                                              prompt={**(r.prompt or {}), "written_passages": "bm25f"}))
    monkeypatch.setattr(fits, "shipped_fit", lambda: reading)
    read_by = []
    monkeypatch.setattr(Service, "passages", lambda self, ob, query, cfg=None: read_by.append(cfg) or
                        Books.passages(self.books, ob, query, cfg))
    (tmp_path / "l.txt").write_text(LIGHTHOUSE)
    svc = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm=tiny_llm_path))
    book = svc.intake(text=tmp_path / "l.txt")
    ans = svc.answer(book, "Who rowed to the village for bread?")
    assert any("wrote" in w for w in ans.why), ans.why
    assert [c.fusion for c in read_by] == ["bm25f"]  # the fit's recipe, not the service's default
    w, reader = svc.written(book, "Who rowed to the village for bread?")
    assert isinstance(w, Written) and w.text == (reader.answer or reader.withheld)
    read_by.clear()  # `ask --quick`: counting alone, no reader writing
    quick = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm=tiny_llm_path, reading=False))
    ans = quick.answer(book, "Who rowed to the village for bread?")
    assert read_by == [] and not any("wrote" in w for w in ans.why) and ans.characters


def test_which_with_a_noun_for_people_asks_for_a_person_without_changing_the_who_set():
    from whoqa.core.questions import question_kind
    from whoqa.service.routing import check_route
    for q in ("Which widow takes the Italian twins in as lodgers?", "Which of the servants is killed by the bull?",
              "Which American phrenologist turns up at the Glandier?"):
        assert question_kind(q).person and not question_kind(q).who and check_route(question_kind(q), "auto")  # the characters
    for q in ("Which box at the Opera is reserved for the ghost?", "Which college is Tom sent to?"):
        assert not question_kind(q).person and not check_route(question_kind(q), "auto")
    assert question_kind("Who kills Twala?").person and question_kind("Who kills Twala?").who


def test_written_answers_are_read_back_per_question_and_a_damaged_file_is_one_line(tmp_path):
    """The written answers a cross-validation reads (`whoqa rerank --written FILE`): question id -> the characters
    linked, in order; a file that is not one is named with how to make it again."""
    import gzip
    import json
    from whoqa.ranker.written import load_written
    path = tmp_path / "w.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"key": "17", "linked": [4, 2], "text": "Helen"}) + "\n")
        f.write(json.dumps({"key": "18", "linked": [], "text": "the peddler"}) + "\n")
    assert load_written(path) == {"17": [4, 2], "18": []}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "1", "linked": [1]}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl is not a file of written answers"):
        load_written(bad)
    with pytest.raises(FileNotFoundError, match="whoqa choice-rows"):
        load_written(tmp_path / "missing.jsonl.gz")
    rows = tmp_path / "rows.jsonl.gz"  # `whoqa choice-rows`'s own rows name the link "written"
    with gzip.open(rows, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"key": "17", "written": [4], "choice": {}}) + "\n")
    assert load_written(rows) == {"17": [4]}


def test_a_reader_that_wrote_only_the_questions_person_is_asked_once_more_told_so(book, monkeypatch):
    """`write_again` (a fit with "written_again"): the question is asked again with "(The answer is not X.)" over the
    same passages; the second answer stands where it links to someone, else the first (and its Answer) is kept."""
    from types import SimpleNamespace
    from whoqa.ranker.written import Written
    from whoqa.service import reading
    aliases = AliasIndex(book.characters)
    query = Query.read("Who does Glenister thank?").about(aliases)
    glenister = cast_of(book).of(next(iter(query.named)))
    asked, second = [], [Written("Joe Dextry", linked=[7])]
    monkeypatch.setattr(reading, "_write", lambda svc, ob, q, wins, a=None: (asked.append(a.text), (second[0], "ans2"))[1])
    ob = SimpleNamespace(book=book, query=lambda text: Query.read(text).about(aliases))
    first = (Written("Glenister thanks himself", named_passed=[glenister]), "ans1")
    got, ans = reading.write_again(None, ob, query, [], first)
    name = book.characters[glenister].name
    assert asked == [f"Who does Glenister thank? (The answer is not {name}.)"]
    assert got.linked == [7] and ans == "ans2" and glenister in got.named_passed
    second[0] = Written("himself")  # linking no one: the first stands
    assert reading.write_again(None, ob, query, [], first) == first


STAGE = ("Anna Page and Anna Lee were sisters. Anna Lee painted the scenery. Anna Page kept the books. "
         "Juliet was the role everyone wanted. Rose Hale acts Juliet in the play. Rose Hale bowed. Juliet died in the "
         "last act. Anna Page laughed.")


def test_the_linking_that_knows_the_book(parsed):
    """A role's name is not its player; a first name two people share is the one the passages mention; a person
    the passages do not mention is never linked; a name nobody in the cast has is kept, not linked through a
    description."""
    book = parsed(STAGE)
    aliases = AliasIndex(book.characters)
    cast = cast_of(book)

    def knows(question, text, sentences):
        w = link(book, aliases, Query.read(question).about(aliases), text, sentences, knows=True)
        return w, [cast.names[r] for r in w.linked]
    painted = [i for i in range(len(book.sentences)) if "painted" in book.sentence_text(i)[0]]
    _, names = knows("Who painted the scenery?", "Anna", painted)
    _, plain = _link(book, "Who painted the scenery?", "Anna")
    assert names and "Lee" in names[0] and plain  # the Anna those sentences mention (plain linking: the most mentioned)
    acts = [i for i in range(len(book.sentences)) if "acts" in book.sentence_text(i)[0]]
    w, names = knows("Who is the actress in the play?", "the girl who acts Juliet", acts)
    assert names == ["Rose Hale"] and w.how == "mention"  # the one the passage gives the role to
    w, names = knows("Who kept the books?", "Rose Hale", painted)
    assert names == [] and w.outside  # Rose is in the book, not in the passages read
    w, names = knows("Who kept the books?", "It was Edith Crane", painted)
    assert names == [] and w.unknown == ["Edith Crane"]

