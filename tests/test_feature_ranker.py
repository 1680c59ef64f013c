"""The feature ranker for new books: a conditional logit whose maximum-likelihood fit recovers the weights that made
the data, whose probabilities are calibrated on data like its training data, and whose second stage only reorders the
first stage's top k by what the LLM adds."""
from collections import Counter

import numpy as np
import pytest

from whoqa.core.calibration import ece
from whoqa.evaluation.feature_ranker import (STAGE1, FeatureRanker, character_features, fit, fit_ranker, joint_features,
                                             softmax, with_llm)


def _questions(w, n, seed, chars=8):
    """n questions of `chars` candidates with random features and an answer drawn from softmax(x . w)."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(n):
        x = rng.normal(size=(chars, len(w)))  # (C, F)
        y = np.zeros(chars, dtype=bool)
        y[rng.choice(chars, p=softmax(x @ np.array(w)))] = True
        xs.append(x)
        ys.append(y)
    return xs, ys


def test_the_fit_recovers_the_weights_that_made_the_answers():
    true = [1.5, -1.0, 0.5]
    xs, ys = _questions(true, 3000, 0)
    assert fit(xs, ys) == pytest.approx(true, abs=0.15)


def test_questions_without_a_right_candidate_do_not_move_the_fit():
    xs, ys = _questions([1.0, 0.0, 0.0], 500, 1)
    empty = [np.zeros(8, dtype=bool)] * 200
    np.testing.assert_allclose(fit(xs + xs[:200], ys + empty), fit(xs, ys), atol=1e-6)


def test_probabilities_of_the_fit_are_calibrated_on_new_questions_of_the_same_kind():
    xs, ys = _questions([2.0, -1.0, 0.5], 2000, 2)
    r = FeatureRanker(list(fit(xs, ys)), [0.0] * 4, top_k=8, p_in=1.0)
    test_x, test_y = _questions([2.0, -1.0, 0.5], 2000, 3)
    conf, hit = [], []
    for x, y in zip(test_x, test_y):
        order, p = r.probabilities(x, None)
        conf.append(p[0])
        hit.append(bool(y[order[0]]))
    assert ece(np.array(conf), np.array(hit)) < 0.03
    # a model that is too sure (weights x 3) is not
    sure = FeatureRanker([3 * w for w in r.stage1], [0.0] * 4, top_k=8, p_in=1.0)
    conf = [sure.probabilities(x, None)[1][0] for x in test_x]
    hit = [bool(y[sure.probabilities(x, None)[0][0]]) for x, y in zip(test_x, test_y)]
    assert ece(np.array(conf), np.array(hit)) > 0.1


def test_the_second_stage_follows_an_informative_llm_and_keeps_the_first_stage_outside_the_top_k():
    rng = np.random.default_rng(4)
    x1, y1, right = [], [], []
    for q in range(400):
        x = rng.normal(size=(10, len(STAGE1)))  # (C, 3)
        x[:, 0] = np.sort(x[:, 0])[::-1]  # stage 1 ranks by the first feature: candidates 0..9 in order
        y = np.zeros(10, dtype=bool)
        y[q % 3 + 1] = True  # the right one is 2nd to 4th by stage 1
        x1.append(x)
        y1.append(y)
        right.append(q % 3 + 1)

    def llm(i, top):  # the LLM is sure of the right name
        return [-1.0 if j == right[i] else -9.0 for j in top]
    r = fit_ranker(x1, y1, 5, llm)
    assert r.stage2[3] > 1.0  # the LLM's weight
    x = x1[0]
    order, p = r.probabilities(x, llm(0, r.first(x)[:5]))
    assert order[0] == right[0] and p[0] > 0.5
    assert list(order[5:]) == list(r.first(x)[5:])  # outside the top k: stage 1's order
    assert p.sum() == pytest.approx(1.0) and p[:5].sum() == pytest.approx(r.p_in)


def test_character_features_name_the_share_the_context_and_the_question():
    chars = [{"id": 0, "count": 30}, {"id": 1, "count": 10}, {"id": 2, "count": 60}]
    ids, x = character_features(chars, Counter({1: 3}), {2})
    assert ids == [0, 1, 2] and x.shape == (3, 3)
    np.testing.assert_allclose(np.exp(x[:, 0]), [0.3, 0.1, 0.6])
    np.testing.assert_allclose(x[:, 1], [0.0, np.log(4), 0.0])
    assert list(x[:, 2]) == [0.0, 0.0, 1.0]
    s = with_llm(x, [-1.0, -2.0, -3.0])  # (3, 4): the LLM's scores log-softmaxed over the k names
    assert np.exp(s[:, 3]).sum() == pytest.approx(1.0) and s[0, 3] > s[1, 3] > s[2, 3]


def test_the_joint_form_learns_how_sure_the_top_k_is_per_question_and_stays_calibrated():
    """Answers drawn from a joint model (stage 1 over all characters, the top 5 lifted by an LLM that is informative):
    the joint fit recovers its second-stage weights, its top probabilities are calibrated on new questions, and the
    top k's mass moves with the LLM's certainty where the product form's is the constant p_in."""
    rng = np.random.default_rng(5)
    w1 = np.array([1.0, 0.5, -1.0])
    w2 = np.array([1.0, 0.5, -1.0, 0.8, 0.0, 0.3, 0.0, 0.6])  # stage-1 features; in_top_k, their top-k terms, llm

    def draw(n):
        xs, ys, llms = [], [], []
        for _ in range(n):
            x = rng.normal(size=(12, 3))  # (C, 3)
            top = np.argsort(-(x @ w1), kind="stable")[:5]
            llm = rng.normal(scale=3.0, size=12)  # (C,) the LLM's score of every character's name
            z = joint_features(x, top, list(llm[top])) @ w2  # (C,)
            y = np.zeros(12, dtype=bool)
            y[rng.choice(12, p=softmax(z))] = True
            xs.append(x), ys.append(y), llms.append(llm)
        return xs, ys, llms
    xs, ys, llms = draw(3000)
    r = fit_ranker(xs, ys, 5, lambda i, top: list(llms[i][top]), form="joint")
    assert r.form == "joint" and len(r.stage2) == 8 and r.features["stage2"][3] == "in_top_k"
    assert r.stage2 == pytest.approx(list(w2), abs=0.2)
    test_x, test_y, test_llm = draw(2000)
    conf, hit, mass = [], [], []
    for x, y, llm in zip(test_x, test_y, test_llm):
        order, p = r.probabilities(x, list(llm[r.first(x)[:5]]))
        conf.append(p[0])
        hit.append(bool(y[order[0]]))
        mass.append(p[np.isin(order, r.first(x)[:5])].sum())
    assert ece(np.array(conf), np.array(hit)) < 0.03
    assert np.std(mass) > 0.05  # the top k's share is the question's own
    product = fit_ranker(xs, ys, 5, lambda i, top: list(llms[i][top]))
    order, p = product.probabilities(test_x[0], list(test_llm[0][product.first(test_x[0])[:5]]))
    assert p[np.isin(order, product.first(test_x[0])[:5])].sum() == pytest.approx(product.p_in)
    with pytest.raises(ValueError, match="form"):
        fit_ranker(xs[:5], ys[:5], 5, lambda i, top: list(llms[i][top]), form="stacked")
