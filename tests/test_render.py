"""Passages rendered with the engine's coreference, on a real spaCy parse of a text written for it."""
import pytest

from whoqa.llm.config import passage_variant as variant
from whoqa.llm.render import RENDERINGS, characters, render, shown
from whoqa.retrieval.bm25f import Window

TEXT = ("Helen Chester walked to the harbour with Roy Glenister. She smiled at him, and he took her bag. "
        "Helen waved to the captain. Roy Glenister laughed.")


@pytest.fixture(scope="module")
def book(parsed):
    return parsed(TEXT)


def ids(book):
    return {c.name: c.id for c in book.characters.values()}


def window(book):
    return [Window(0, len(book.sentences) - 1, 1.0)]


def test_raw_is_the_books_words(book):
    assert render(book, window(book), "raw")[0] == (
        "Helen Chester walked to the harbour with Roy Glenister. She smiled at him, and he took her bag. "
        "Helen waved to the captain. Roy Glenister laughed.")


def test_annotate_marks_each_pronoun_with_its_character_and_leaves_names_alone(book):
    text = render(book, window(book), "annotate")[0]
    assert "She [Helen Chester] smiled at him [Roy Glenister]" in text
    assert "he [Roy Glenister] took her [Helen Chester] bag" in text
    assert "Helen waved" in text and "Helen [" not in text  # a proper mention inside the canonical name
    assert text.count("[") == 4


def test_replace_puts_the_name_where_the_pronoun_was_possessives_kept(book):
    text = render(book, window(book), "replace")[0]
    assert "Helen Chester smiled at Roy Glenister, and Roy Glenister took Helen Chester's bag." in text
    assert " she " not in text.lower() and " him" not in text


def test_only_the_candidates_are_marked_and_listed(book):
    helen = ids(book)["Helen Chester"]
    text = render(book, window(book), "annotate", candidates=[helen])[0]
    assert "She [Helen Chester]" in text and "[Roy Glenister]" not in text
    assert characters(book, window(book)) in (["Helen Chester", "Roy Glenister"], ["Roy Glenister", "Helen Chester"])
    assert characters(book, window(book), [helen]) == ["Helen Chester"]
    passages, listed = shown(book, window(book), "raw", "candidates", True, [helen])
    assert listed == ["Helen Chester"] and "[" not in passages[0]
    assert shown(book, window(book), "replace")[1] == []  # no list unless asked


def test_unknown_names_are_refused_and_variants_name_runs():
    with pytest.raises(ValueError, match="rendering 'bold'"):
        render(None, [], "bold")
    assert set(RENDERINGS) == {"raw", "annotate", "replace"}
    assert variant() == ""
    assert variant("annotate", "candidates", True) == "+annotate+marks-candidates+list"


def test_a_name_is_listed_once_with_the_probability_of_its_clusters():
    from whoqa.service.schema import Ranked, one_per_name
    got = one_per_name([Ranked(4, "Holmes", 0.17, 0.5), Ranked(9, "Watson", 0.15, 0.3), Ranked(7, "holmes", 0.13, 0.2),
                        Ranked(2, "Mary", 0.1, None), Ranked(3, "Hudson", 0.05, None)], 3)
    assert [(r.id, r.name) for r in got] == [(4, "Holmes"), (9, "Watson"), (2, "Mary")]
    assert round(got[0].probability, 6) == 0.30 and round(got[0].llm, 6) == 0.7
