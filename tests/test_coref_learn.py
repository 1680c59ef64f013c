"""The learned pronoun resolver: its training lowers the loss, its saved weights give the same links, and whatever the
weights, a pronoun inside a quotation never refers to the quotation's speaker in the third person."""
import pytest

from data_prep.coref import FEATURES, Weights
from data_prep.coref_learn import fit, instances, learned_weights, train
from tests.conftest import litbank_folder

pytestmark = pytest.mark.integration


TWO = ("1245_night_and_day_brat", "145_middlemarch_brat")  # third-person narration: many he/she decisions


@pytest.fixture(scope="module")
def two_folder(shared_data, tmp_path_factory):
    return litbank_folder(shared_data, tmp_path_factory.mktemp("litbank2"), TWO)


@pytest.fixture(scope="module")
def two_docs(engine, two_folder):
    from data_prep.litbank import load_litbank, parse_docs
    docs = load_litbank(two_folder)
    return docs, parse_docs(engine, docs, progress=False)


def test_rule_weights_are_the_hand_set_scores():
    assert len(Weights().vector()) == len(FEATURES) and Weights().distance == 1.5  # the features' signs live apart


def test_training_on_two_documents_lowers_the_loss(engine, two_docs):
    docs, parsed = two_docs
    data = [x for d, p in zip(docs, parsed) for x in instances(d, engine, p)]
    assert len(data) > 20 and all(x.shape[0] == ok.shape[0] >= 2 and ok.any() for x, ok in data)
    weights, losses = fit(data, steps=200)
    assert losses[-1] < losses[0] and weights != Weights()


def test_saved_weights_load_and_give_the_same_links(engine, two_docs, two_folder, tmp_path):
    from data_prep.litbank import predicted
    docs, parsed = two_docs
    rec = train(two_folder, tmp_path / "w.json")
    loaded = learned_weights(tmp_path / "w.json")
    assert loaded == Weights(**rec["weights"]) and "LitBank" in rec["attribution"]
    engine.weights = Weights(**rec["weights"])
    first = predicted(engine, parsed[0])
    engine.weights = loaded
    assert predicted(engine, parsed[0]) == first
    engine.weights = Weights()
    assert learned_weights(tmp_path / "missing.json") is None


@pytest.mark.parametrize("weights", [Weights(), Weights(quote_mismatch=-5.0, distance=0.0, gender=0.0)])
def test_a_quoted_third_person_pronoun_is_never_its_speaker(engine, weights):
    """Even weights that favour the speaker (mismatched quotation rewarded, nothing else counting) cannot link "he"
    in John's own words to John."""
    engine.weights = weights
    try:
        out = engine.process_text('John walked in. Peter was asleep. "He is always late," said John to Mary.')
    finally:
        engine.weights = Weights()
    per = [r for r in out.entity_rows if r[4] == "PER"]  # [character, start, end, PROP|PRON, PER, text]
    john = {r[0] for r in per if r[5] == "John"}
    he = [r for r in per if r[5] == "He"]
    assert len(john) == 1 and len(he) == 1
    assert he[0][0] not in john  # Peter, or nobody: never the speaker
