import json

import pytest

from whoqa.core.book import Book, BookFormatError, write_book_files


def _rows(words, tags=None):
    tags = tags or ["NN"] * len(words)
    rows, pos = [], 0
    for i, (w, t) in enumerate(zip(words, tags)):
        rows.append([0, 0, i, i, w, w.lower(), pos, pos + len(w), "X", t, "dep", i, "O"])
        pos += len(w) + 1
    return rows


def test_write_then_read_back_and_replaced_text(tmp_path):
    words = ["Mr.", "Holmes", "sold", "his", "house", "to", "her", "."]
    tags = ["NNP", "NNP", "VBD", "PRP$", "NN", "IN", "PRP", "."]
    ents = [[3, 0, 1, "PROP", "PER", "Mr. Holmes"], [3, 3, 3, "PRON", "PER", "his"],
            [5, 6, 6, "PRON", "PER", "her"], [9, 4, 4, "NOM", "FAC", "house"]]
    book = {"characters": [{"id": 3, "count": 2, "g": {"argmax": "he/him/his"},
                            "mentions": {"proper": [{"c": 1, "n": "Mr. Holmes"}], "common": [], "pronoun": []}},
                           {"id": 5, "count": 2, "g": None, "mentions": {"proper": [], "common": [], "pronoun": []}}]}
    write_book_files(tmp_path, "b1", _rows(words, tags), ents, book)
    b = Book.load(tmp_path, "b1")
    assert [m.char_id for m in b.mentions] == [3, 3, 5]  # FAC dropped: only PER mentions
    assert b.characters[3].name == "Mr. Holmes" and b.characters[3].gender == "male"
    assert b.characters[5].name == "CHAR_5" and b.characters[5].gender is None
    assert b.replaced_sentence(0) == ["CHAR_3", "sold", "CHAR_3", "'s", "house", "to", "CHAR_5", "."]
    assert b.sentence_words(0) == words


def test_adjacent_mentions_of_one_character_stay_two_tokens(tmp_path):
    words = ["Holmes", "Holmes", "ran"]
    ents = [[1, 0, 0, "PROP", "PER", "Holmes"], [1, 1, 1, "PROP", "PER", "Holmes"]]
    write_book_files(tmp_path, "b", _rows(words), ents, {"characters": [{"id": 1, "count": 2}]})
    assert Book.load(tmp_path).replaced_sentence(0) == ["CHAR_1", "CHAR_1", "ran"]


def test_mentions_of_non_characters_are_not_replaced(tmp_path):
    """BookNLP's rule: an entity seen once, or a group ("they"), is in .entities but is not a character."""
    ents = [[1, 0, 0, "PROP", "PER", "Holmes"], [1, 2, 2, "PRON", "PER", "he"], [7, 3, 3, "PRON", "PER", "they"]]
    write_book_files(tmp_path, "b", _rows(["Holmes", "ran", "he", "they"]), ents,
                     {"characters": [{"id": 1, "count": 2}]})
    assert Book.load(tmp_path).replaced_sentence(0) == ["CHAR_1", "ran", "CHAR_1", "they"]


def test_missing_and_malformed_files_are_named(tmp_path):
    write_book_files(tmp_path, "b", _rows(["a"]), [], {"characters": []})
    (tmp_path / "b.entities").write_text("COREF\tstart_token\tend_token\tprop\tcat\ttext\n1\t0\t5\tPROP\tPER\tx\n")
    with pytest.raises(BookFormatError, match="b.entities.*outside"):
        Book.load(tmp_path, "b")
    (tmp_path / "b.book").unlink()
    with pytest.raises(BookFormatError, match="b.book is missing.*whoqa prepare"):
        Book.load(tmp_path, "b")


def test_reads_booknlp_written_files(tmp_path):
    """A fixture in the exact shape BookNLP 1.0.8 writes (header, gender inference dict, extra fields)."""
    header = "paragraph_ID\tsentence_ID\ttoken_ID_within_sentence\ttoken_ID_within_document\tword\tlemma\t" \
             "byte_onset\tbyte_offset\tPOS_tag\tfine_POS_tag\tdependency_relation\tsyntactic_head_ID\tevent\n"
    (tmp_path / "x.tokens").write_text(header + "0\t0\t0\t0\tEmily\tEmily\t0\t5\tPROPN\tNNP\tnsubj\t1\tO\n"
                                       "0\t0\t1\t1\twept\tweep\t6\t10\tVERB\tVBD\tROOT\t1\tEVENT\n"
                                       "0\t1\t0\t2\tShe\tshe\t12\t15\tPRON\tPRP\tnsubj\t3\tO\n"
                                       "0\t1\t1\t3\tleft\tleave\t16\t20\tVERB\tVBD\tROOT\t3\tEVENT\n")
    (tmp_path / "x.entities").write_text("COREF\tstart_token\tend_token\tprop\tcat\ttext\n"
                                         "7\t0\t0\tPROP\tPER\tEmily\n7\t2\t2\tPRON\tPER\tShe\n")
    (tmp_path / "x.book").write_text(json.dumps({"characters": [{
        "agent": [{"w": "wept", "i": 1}], "patient": [], "mod": [], "poss": [], "id": 7,
        "g": {"inference": {"he/him/his": 0.01, "she/her": 0.98, "they/them/their": 0.01}, "argmax": "she/her",
              "max": 0.98, "total": 2.0}, "count": 2,
        "mentions": {"proper": [{"c": 1, "n": "Emily"}], "common": [], "pronoun": [{"c": 1, "n": "She"}]}}]}))
    b = Book.load(tmp_path)
    assert b.sentences == [(0, 2), (2, 4)]
    assert b.characters[7].gender == "female"
    assert b.replaced_sentence(1) == ["CHAR_7", "left"]


def test_a_book_s_title_is_written_as_a_reader_writes_it():
    """The title a book is listed under: its Gutenberg header's "Title:" (continued lines joined), else the story's
    first line, out of capitals ("THE POISON BELT" -> "The Poison Belt", small words small)."""
    from whoqa.core.text import book_title
    gutenberg = ("The Project Gutenberg eBook of Summer\n\nTitle: Summer\n\nAuthor: Edith Wharton\n\n"
                 "*** START OF THE PROJECT GUTENBERG EBOOK SUMMER ***\n\nSUMMER\n\nI\n\nA girl came out.")
    assert book_title(gutenberg, "SUMMER\n\nI\n\nA girl came out.") == "Summer"
    wrapped = ("Title: The Poison Belt\n        Being an account of another adventure\n\n"
               "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n")
    assert book_title(wrapped, "x") == "The Poison Belt Being an account of another adventure"
    assert book_title("THE POISON BELT\n\nBy Arthur Conan Doyle", "\nTHE POISON BELT OF THE WORLD\n\nBy") == \
        "The Poison Belt of the World"
    assert book_title("Anna rowed out.", "Anna rowed out.\nTom waited.") == "Anna rowed out."
