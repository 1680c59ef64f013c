import json

from data_prep.who_set import DROP_NO_ALIAS, DROP_NOT_CHARACTER, AliasIndex
from whoqa.core.lexicon import is_who_question
from whoqa.core.book import Character


def index():
    chars = [Character(1, "Holmes", ["Holmes", "Mr. Sherlock Holmes", "Sherlock Holmes"], 300, "male"),
             Character(2, "Mrs. Carey", ["Mrs. Carey", "Carey"], 80, "female"),
             Character(3, "Mr. Carey", ["Mr. Carey"], 120, "male"),
             Character(4, "Emily", ["Emily", "Emily St. Aubert"], 200, "female"),
             Character(5, "Rodrigue", ["Rodrigue", "Don Rodrigue"], 50, "male"),
             Character(6, "Edward", ["Edward"], 40, "male"),
             Character(7, "Harriet", ["Harriet"], 30, "female")]
    return AliasIndex({c.id: c for c in chars})


def test_who_questions():
    assert is_who_question("Who helps Emily escape?") and is_who_question("WHOM did he marry?")
    assert is_who_question("Whose house burns?") and is_who_question("Which character dies first?")
    assert not is_who_question("What does Emily find?") and not is_who_question("Where is the wholesome inn?")


def test_alias_matching_tricky_names():
    ix = index()
    assert ix.match("Sherlock Holmes.")[0] == {1}
    assert ix.match("Mr. Holmes")[0] == {1}
    assert ix.match("sherlock")[0] == {1}  # first name alone, lowercase answer
    assert ix.match("Mrs. Carey")[0] == {2}  # title gender separates husband and wife
    assert ix.match("Mr. Carey's")[0] == {3}  # possessive
    assert ix.match("Edward and Harriet")[0] == {6, 7}
    assert ix.match("Rodrique.")[0] == {5}  # spelling variant
    assert ix.match("Emily St. Aubert")[0] == {4}
    assert ix.match("HOLMES")[0] == {1}


def test_possessive_phrases_and_non_names_are_dropped_with_reasons():
    ix = index()
    assert ix.match("Emily's father") == (set(), DROP_NOT_CHARACTER)
    assert ix.match("her brother") == (set(), DROP_NOT_CHARACTER)
    assert ix.match("The War Office") == (set(), DROP_NO_ALIAS)


def test_build_who_set_on_prepared_books(mini_data, dd_ws):
    from data_prep.prepare import PrepareConfig, prepare
    from tests.conftest import DYING_DETECTIVE
    (mini_data / "narrativeqa" / "qaps.csv").write_text(
        "document_id,set,question,answer1,answer2\n"
        f"{DYING_DETECTIVE},test,Who is dying?,Sherlock Holmes,Holmes\n"
        f"{DYING_DETECTIVE},test,What is the disease?,a coolie disease,Tapanuli fever\n"
        f"{DYING_DETECTIVE},test,Who brings Watson to Holmes?,Mrs. Hudson,Mrs Hudson\n"
        f"{DYING_DETECTIVE},test,Who is Smith's nephew?,Victor Savage,Victor\n"
        f"{DYING_DETECTIVE},test,Who hides behind the bed?,his friend,the doctor\n"
        f"{'f' * 40},test,Who is it?,Nobody,Nobody\n")
    ws = dd_ws  # prepared once per session; the Who set is rebuilt from these questions
    rep = prepare(PrepareConfig(str(mini_data), str(ws), books=[DYING_DETECTIVE]), progress=False)
    assert rep.who_set["kept"] == 3 and rep.who_set["not a Who question"] == 1
    assert rep.who_set["answer is not a character"] == 1 and rep.who_set["book not prepared"] == 1
    qs = json.loads((ws / "who" / "who_questions.json").read_text())
    chars = json.loads((ws / "who" / "characters.json").read_text())[DYING_DETECTIVE]
    name = {c["id"]: c["name"] for c in chars}
    assert [q["question_id"] for q in qs] == [0, 2, 3]
    assert name[qs[0]["answers"][0]] == "Holmes" and name[qs[1]["answers"][0]] == "Mrs. Hudson"
    assert "Victor Savage" in [c["aliases"] for c in chars if c["id"] == qs[2]["answers"][0]][0]
