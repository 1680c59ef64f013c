"""Artificial questions on real spaCy parses of sentences written for each rule."""
import pytest

from data_prep.artificial import SKIP_ANSWER_IN_QUESTION, SKIP_NO_CONTENT, generate, sample
from whoqa.core.store import read_artificial

INTRO = "Young Mr. Marriat met Miss Hermione Granger and Mr. Holmes at the station.\n\n"


@pytest.fixture(scope="module")
def made(parsed):
    def make(text):
        b = parsed(INTRO + text)
        qs, stats = generate(b)
        names = {c.id: [w for w in c.name.split() if w not in ("Mr.", "Miss")][0] for c in b.characters.values()}
        return [(q["t"], names[q["a"]]) for q in qs if q["s"] > 0], stats
    return make


def asked(made, text):
    return made(text)[0]


def test_paper_examples(made):
    assert asked(made, "Marriat had a gift for the invention of stories.") == \
        [("Who had a gift for invention?", "Marriat")]
    assert asked(made, "Hermione was attacked by another spell.") == [("Who was attacked by a spell?", "Hermione")]


def test_object_question_uses_do_support(made):
    qs = asked(made, "Marriat thanked Hermione for the book.")
    assert ("Who did Marriat thank for book?", "Hermione") in qs
    assert ("Who thanked Hermione for book?", "Marriat") in qs


def test_auxiliary_moves_before_subject(made):
    qs = asked(made, "Marriat had warned Holmes in a letter.")
    assert ("Who had Marriat warned in a letter?", "Holmes") in qs  # indefinite determiners stay, as "a"
    assert ("Who had warned Holmes in a letter?", "Marriat") in qs


def test_negation_is_kept(made):
    qs = asked(made, "Hermione did not answer the letter from the ministry.")
    assert qs == [("Who did not answer the letter from ministry?", "Hermione")]
    assert asked(made, "Hermione had no money.") == [("Who had no money?", "Hermione")]


def test_passive_without_agent_is_degenerate(made):
    qs, stats = made("Hermione was killed.")
    assert qs == [] and stats[SKIP_NO_CONTENT] >= 1


def test_passive_with_agent(made):
    assert ("Who was rescued by Holmes?", "Hermione") in asked(made, "Hermione was rescued by Holmes.")


def test_conjoined_verbs_share_the_subject(made):
    qs = asked(made, "Holmes rose and left the room quickly.")
    assert ("Who left the room?", "Holmes") in qs


def test_conjoined_subjects_each_get_a_question(made):
    qs = asked(made, "Marriat and Hermione visited the castle.")
    assert ("Who visited the castle?", "Marriat") in qs and ("Who visited the castle?", "Hermione") in qs


def test_answer_mentioned_in_question_is_skipped(made):
    qs, stats = made("Hermione saw Hermione in the mirror.")
    assert qs == [] and stats[SKIP_ANSWER_IN_QUESTION] >= 1


def test_first_person_inside_quotes_becomes_third_person(made):
    qs = asked(made, '"I hate the fog," said Holmes.')
    assert ("Who hates the fog?", "Holmes") in qs


def test_subordinate_clause_verb_gets_its_own_question(made):
    qs = asked(made, "Holmes smiled when Hermione entered the room.")
    assert ("Who entered the room?", "Hermione") in qs
    assert not any(q.startswith("Who smiled") for q, _ in qs)


def test_particle_and_xcomp(made):
    assert asked(made, "Hermione picked up the old wand.") == [("Who picked up the wand?", "Hermione")]
    assert ("Who wanted to leave the castle?", "Hermione") in asked(made, "Hermione wanted to leave the castle.")


def test_words_quoted_inside_narration_are_not_the_verbs(made):
    qs = asked(made, '"Certainly not," replied Holmes.')
    assert all("Certainly" not in q and "certainly" not in q for q, _ in qs)


def test_files_and_sample(mini_data, tmp_path):
    from data_prep.prepare import PrepareConfig, prepare
    from tests.conftest import DYING_DETECTIVE
    ws = tmp_path / "ws"
    rep = prepare(PrepareConfig(str(mini_data), str(ws), books=[DYING_DETECTIVE], embeddings=False), progress=False)
    qs = read_artificial(ws / "artificial" / f"{DYING_DETECTIVE}.jsonl.gz")
    assert len(qs) == rep.artificial["totals"]["questions"] > 100
    q = qs[0]
    assert q["q"][0] == "who" and q["q"][-1] == "?" and q["c"] == [max(0, q["s"] - 19), q["s"]]
    lines = sample(ws, 5)
    assert len(lines) == 5 and all("->" in l and "source:" in l for l in lines)
