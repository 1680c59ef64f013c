"""Short answers cut from what an LLM said: its first words, or the passages' span that best matches it."""
import pytest

from whoqa.llm.shorten import passage_span, shortener


def test_the_span_is_the_books_words_for_what_the_model_meant():
    passages = ["I go to find Maulger, said Spadevil.", "The forest was dark."]
    assert passage_span("He goes to find Maulger in the forest.", passages) == "to find Maulger"
    assert passage_span("Helen Chester", ["She smiled. Helen Chester waved to Roy."]) == "Helen Chester"
    assert passage_span("nothing here", ["I go"]) == "nothing here"  # nothing matches: the answer itself
    assert passage_span("", passages) == "" and passage_span("Maulger", []) == "Maulger"
    long = "a " + " ".join(f"w{i}" for i in range(30))
    assert len(passage_span(long, [long], max_words=12).split()) <= 12


def test_shorteners_are_chosen_by_name():
    assert shortener("none")("The answer is the box.", []) == "The answer is the box."
    assert shortener("words3")("a very long answer indeed", []) == "a very long"
    assert shortener("span")("the box", ["He opened the box."]) == "the box"
    for bad in ("words0", "short", "words"):
        with pytest.raises(ValueError, match="unknown answer shortening"):
            shortener(bad)
