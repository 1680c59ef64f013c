"""Coreferee as the peer resolver: its training marks join mentions of one gold chain, it is trained and judged on
LitBank document folds, and nothing of a held-out document's gold reaches its predictions."""
import dataclasses

import pytest

pytest.importorskip("coreferee", reason="coreferee is installed by install.sh (whoqa[coref])")
from data_prep import coref_peer  # noqa: E402
from data_prep.litbank import evaluate, load_litbank  # noqa: E402
from tests.conftest import litbank_folder  # noqa: E402

pytestmark = pytest.mark.integration

FOUR = ("1245_night_and_day_brat", "145_middlemarch_brat", "1342_pride_and_prejudice_brat", "514_little_women_brat")


@pytest.fixture(scope="module")
def four_folder(shared_data, tmp_path_factory):
    return litbank_folder(shared_data, tmp_path_factory.mktemp("litbank4"), FOUR, sentences=40)  # (for speed)


@pytest.fixture(scope="module")
def judged(engine, four_folder):
    """evaluate()'s result with coreferee over 2 document folds, and each document's predictions."""
    preds = []

    def two_folds(engine_, docs, parsed):
        got, info = coref_peer.cross_validated_predictions(engine_, docs, parsed, folds=2)
        preds.extend(got)
        return got, info
    return evaluate(four_folder, engine=engine, predictions=two_folds), preds


def test_training_marks_join_mentions_of_one_gold_chain(engine, four_folder):
    from coreferee.rules import RulesAnalyzerFactory
    gold = load_litbank(four_folder, max_docs=1)[0]
    doc = coref_peer.whole_doc(engine.nlp, gold)
    assert len(doc) == sum(len(s) for s in gold.sentences)  # LitBank's tokens, one Doc
    coref_peer.mark_gold(doc, gold.chains, RulesAnalyzerFactory().get_rules_analyzer(engine.nlp))
    chain_of = {}
    for k, chain in enumerate(gold.chains):
        for s, e in chain:
            for i in range(s, e + 1):
                chain_of.setdefault(i, set()).add(k)
    pairs = [(t.i, m.root_index) for t in doc
             for m in getattr(t._.coref_chains, "temp_potential_referreds", None) or []
             if getattr(m, "true_in_training", False)]
    assert len(pairs) > 50
    assert all(chain_of.get(a, set()) & chain_of.get(b, set()) for a, b in pairs)


def test_coreferee_is_trained_and_judged_on_document_folds(judged):
    res, _ = judged
    assert res["resolver"].startswith("coreferee") and res["documents"] == 4
    assert res["conll_f1"] > 20 and res["pronoun_accuracy"] > 5  # it links pronouns to names
    assert res["mentions"]["aligned"] > 0.5 * res["mentions"]["gold"]


def test_no_gold_of_a_held_out_document_reaches_its_predictions(engine, four_folder, judged):
    docs = load_litbank(four_folder)
    _, preds = judged
    halved = [dataclasses.replace(d, chains=d.chains[::2]) if k % 2 == 0 else d  # half of fold 0's gold gone
              for k, d in enumerate(docs)]
    changed, _ = coref_peer.cross_validated_predictions(engine, halved, None, folds=2)
    assert changed[0] == preds[0] and changed[2] == preds[2]  # fold 0 is judged by a model of fold 1's documents
    assert changed[1] != preds[1] or changed[3] != preds[3]  # fold 1's model learned from fold 0's gold
