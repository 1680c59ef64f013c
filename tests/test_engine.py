"""The offline engine on texts written for the purpose, and on a real short story."""
from collections import Counter

from tests.conftest import DYING_DETECTIVE
from whoqa.core.book import Book, write_book_files


def run(engine, text, tmp_path):
    out = engine.process_text(text)
    write_book_files(tmp_path, "t", out.token_rows, out.entity_rows, out.book)
    return Book.load(tmp_path, "t")


def char_of(book, word, nth=0):
    """Character id of the nth mention whose text is `word`."""
    ms = [m for m in book.mentions if m.text == word]
    return ms[nth].char_id


def test_name_variants_cluster_and_conjoined_names_split(engine, tmp_path):
    text = ("Mr. Sherlock Holmes lived in London. Holmes was a detective.\n\n"
            "Everyone knew Sherlock Holmes. Edward and Harriet visited him on Sunday.\n\n"
            "Edward spoke first. Harriet laughed at Edward.\n")
    b = run(engine, text, tmp_path)
    holmes = {char_of(b, "Mr. Sherlock Holmes"), char_of(b, "Holmes"), char_of(b, "Sherlock Holmes")}
    assert len(holmes) == 1
    edward, harriet = char_of(b, "Edward"), char_of(b, "Harriet")
    assert edward != harriet and holmes.isdisjoint({edward, harriet})
    assert char_of(b, "Edward", 1) == edward and char_of(b, "Harriet", 1) == harriet


def test_pronouns_follow_gender_and_recency(engine, tmp_path):
    text = ("Mrs. Hudson opened the door. Mr. Holmes was asleep on the sofa.\n\n"
            "She looked at him for a long time. Then he woke up and she smiled at him.\n")
    b = run(engine, text, tmp_path)
    hudson, holmes = char_of(b, "Mrs. Hudson"), char_of(b, "Mr. Holmes")
    assert [char_of(b, "She"), char_of(b, "she")] == [hudson, hudson]
    assert [char_of(b, "him"), char_of(b, "he"), char_of(b, "him", 1)] == [holmes, holmes, holmes]
    assert b.characters[hudson].gender == "female" and b.characters[holmes].gender == "male"


def test_binding_object_pronoun_is_not_its_verbs_subject(engine, tmp_path):
    b = run(engine, "Tom met Jack in the street. Jack greeted him warmly.\n", tmp_path)
    assert char_of(b, "him") == char_of(b, "Tom")


def test_reflexive_binds_to_its_subject(engine, tmp_path):
    b = run(engine, "Tom met Jack in the street. Jack hurt himself on the railing.\n", tmp_path)
    assert char_of(b, "himself") == char_of(b, "Jack", 1)


def test_first_person_narrator_and_quoted_speaker(engine, tmp_path):
    text = ("I went to see my old friend Dr. Mortimer on Tuesday. I found him in his study.\n\n"
            "\"I am glad you came,\" said Mortimer. \"My wife is away.\"\n\n"
            "I told him that I was glad too. I sat down and waited for the tea.\n")
    b = run(engine, text, tmp_path)
    narrator = [m.char_id for m in b.mentions if m.text in ("I", "my") and not _in_quote(b, m.start)]
    assert narrator and set(narrator) == {0}
    mortimer = char_of(b, "Mortimer")
    quoted = [m for m in b.mentions if m.text in ("I", "My") and _in_quote(b, m.start)]
    assert quoted and all(m.char_id == mortimer for m in quoted)
    assert char_of(b, "you") == 0  # addressed to the narrator, the other party of the conversation


def _in_quote(book, i):
    words = [t.word for t in book.tokens[:i] if t.paragraph == book.tokens[i].paragraph]
    return words.count('"') % 2 == 1


def test_character_records_are_booknlp_shaped(engine, tmp_path):
    out = engine.process_text("Anna loved Peter. Peter was kind. Anna kissed Peter.\n")
    chars = {c["mentions"]["proper"][0]["n"]: c for c in out.book["characters"]}
    assert set(chars) == {"Anna", "Peter"}
    assert [a["w"] for a in chars["Anna"]["agent"]] == ["loved", "kissed"]
    assert [p["w"] for p in chars["Peter"]["patient"]] == ["loved", "kissed"]
    assert [m["w"] for m in chars["Peter"]["mod"]] == ["kind"]


def test_dying_detective(engine, shared_data, tmp_path):
    """Holmes holds his name variants and most he/him/his that refer to him; Culverton Smith and Mrs. Hudson are
    characters of their own; the narrator (Watson) is one character."""
    from data_prep.narrativeqa import NarrativeQA
    text = NarrativeQA(shared_data).book_text(DYING_DETECTIVE)
    b = run(engine, text, tmp_path)
    by_name = {}
    for c in b.characters.values():
        for a in c.aliases:
            by_name.setdefault(a, set()).add(c.id)
    holmes = by_name["Holmes"]
    assert len(holmes) == 1
    (hid,) = holmes
    assert {"Mr. Holmes", "Mr. Sherlock Holmes"} <= set(b.characters[hid].aliases)
    smith, hudson = by_name["Mr. Culverton Smith"], by_name["Mrs. Hudson"]
    assert len({hid} | smith | hudson) == 3
    assert by_name["Watson"] == {0} and by_name["Dr. Watson"] == {0}
    male = Counter(m.char_id for m in b.mentions if m.text.lower() in ("he", "him", "his"))
    assert male.most_common(1)[0][0] == hid and male[hid] > 2 * male[next(iter(smith))]
    narr = Counter(m.char_id for m in b.mentions if m.text in ("I", "my", "me", "myself"))
    assert narr[0] > 100


def test_pronoun_or_numeral_tagged_as_a_name_is_no_character(engine, tmp_path):
    b = run(engine, '"I never heard the name," said I. "Nor I," said Holmes. Chapter II. Holmes smiled.\n', tmp_path)
    names = {a for c in b.characters.values() for a in c.aliases}
    assert not names & {"I.", "I", "II."}


def _per_rows(out, word):
    """(entity id, token) of every PER row whose text is `word`."""
    return [(r[0], r[1]) for r in out.entity_rows if r[4] == "PER" and r[5] == word]


def test_a_pronoun_with_no_named_antecedent_is_an_unnamed_person(engine):
    """'An old woman ... She ... she': one person who is no character, not Tom's pronouns and not left out."""
    out = engine.process_text("Tom lived alone.\n\nMany years later an old woman came to the village. She was tired. "
                              "She sat by the well and she wept.\n")
    ids = {c for c, _ in _per_rows(out, "She") + _per_rows(out, "she")}
    assert len(ids) == 1
    characters = {c["id"] for c in out.book["characters"]}
    assert ids.isdisjoint(characters) and len(_per_rows(out, "She") + _per_rows(out, "she")) == 3


def test_speech_in_single_quotes_and_a_nameless_speaker(engine):
    """British typography quotes speech with single marks; a quotation whose speaker is a common noun ("said the
    old woman") is not given to the character named nearby."""
    text = ("\u2018I am going home,\u2019 said Holmes. \u2018Stay with me,\u2019 he said.\n\n"
            "\u2018I know the way,\u2019 said the old woman.\n")
    out = engine.process_text(text)
    from data_prep.coref import quote_ids
    from data_prep.parse import parse_text
    tokens = parse_text(engine.nlp, text).tokens
    qids = quote_ids(tokens)
    assert [t.word for t, q in zip(tokens, qids) if q == 0] == ["\u2018", "I", "am", "going", "home", ",", "\u2019"]
    holmes = next(c for c, i in _per_rows(out, "Holmes"))
    firsts = _per_rows(out, "I")
    assert firsts[0][0] == holmes and firsts[1][0] != holmes
    assert _per_rows(out, "me")[0][0] == holmes


def test_a_narrator_who_names_themself(engine, tmp_path):
    text = ("Call me Ishmael. Some years ago I went to sea. I thought I would sail about a little.\n\n"
            "I met Queequeg at the inn. I liked him. I told him my plans.\n")
    b = run(engine, text, tmp_path)
    assert "Ishmael" in b.characters[0].aliases
    assert {m.char_id for m in b.mentions if m.text in ("I", "my")} == {0}


def test_gender_from_the_books_pronouns_outweighs_the_names_prior(engine, tmp_path):
    """A name Gutenberg text has called he only a few times says little ("Tuppence"); a book's own she decides
    even against a strong prior (the Famous Five's George is a girl)."""
    from collections import Counter as C
    from data_prep.characters import name_gender
    assert name_gender(C({"Tuppence": 3}))[0] is None and name_gender(C({"George": 3}))[0] == "male"
    text = ("George opened the letter. She read it twice. George laughed and she put it away.\n\n"
            "Later George went out. She walked to the park. George was happy and she sang.\n")
    b = run(engine, text, tmp_path)
    assert b.characters[char_of(b, "George")].gender == "female"


def test_a_speech_verb_speaks_for_its_own_quotation(engine, tmp_path):
    """'"...," cried Amy' after Beth's sentence: Amy speaks (spaCy may parse her as the verb's object), and a speech
    verb beyond the next quotation is that quotation's."""
    text = ('Beth looked at her rough hands with a sigh. "I do not believe any of you suffer as I do," cried Amy. '
            '"I know what you mean," said Meg.\n')
    b = run(engine, text, tmp_path)
    amy, meg = char_of(b, "Amy"), char_of(b, "Meg")
    firsts = [m.char_id for m in b.mentions if m.text == "I"]
    assert firsts == [amy, amy, meg]
