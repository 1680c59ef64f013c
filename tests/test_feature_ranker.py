"""The feature ranker for new books: a conditional logit whose maximum-likelihood fit recovers the weights that made
the data, whose probabilities are calibrated on data like its training data, and whose second stage only reorders the
first stage's top k by what the LLM adds."""
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from whoqa.core.calibration import ece
from whoqa.ranker.features import FEATURE_VERSION, SERVED, STAGE1, character_features
from whoqa.ranker.model import (LLM_FEATURES, FeatureRanker, fit, fit_ranker, select_llm_features, softmax,
                                with_llm)


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


def test_the_written_answer_goes_first_with_the_share_it_was_right_and_the_rest_keep_their_order():
    xs, ys = _questions([2.0, -1.0, 0.5], 400, 5)
    rng = np.random.default_rng(6)
    # a reader right for 3 questions in 5 where it links, and linking half the questions
    right = [int(np.flatnonzero(y)[0]) for y in ys]
    written = [None if k % 2 else (r if rng.random() < 0.6 else (r + 1) % 8) for k, r in enumerate(right)]
    r = fit_ranker(xs, ys, 8, written_first=written)
    agree = [r.probabilities(x, None)[0][0] == w for x, w in zip(xs, written)]
    for k, same in enumerate((True, False)):  # the share right where counting agrees, and where it does not
        shown = np.mean([ys[i][w] for i, w in enumerate(written) if w is not None and agree[i] == same])
        assert r.written_first[k] == pytest.approx(shown)
    assert r.written_first[0] > r.written_first[1]  # (where counting agrees, the written answer is right more often)
    assert fit_ranker(xs, ys, 8).written_first is None  # (no written answers: the two stages alone)
    x = xs[0]
    counted, p = r.probabilities(x, None)
    order, probs = r.probabilities(x, None, int(counted[3]))
    assert order[0] == counted[3] and probs[0] == pytest.approx(r.written_first[1])
    assert r.probabilities(x, None, int(counted[0]))[1][0] == pytest.approx(r.written_first[0])
    assert list(order[1:]) == [j for j in counted if j != counted[3]]  # the rest as counted, rescaled
    assert probs.sum() == pytest.approx(1.0)
    assert probs[1] / probs[2] == pytest.approx(p[0] / p[1])
    assert list(r.probabilities(x, None, None)[0]) == list(counted)  # no written link: counting alone


def test_a_written_only_fit_asks_the_llm_nothing_where_the_written_answer_links():
    """`written_only` (a warm answer's time): where the written answer links, the shares are judged against the first
    stage's order, not the two stages' (whose name scores it will not have), and serving skips the LLM there."""
    xs, ys = _questions([2.0, -1.0, 0.5], 400, 5)
    right = [int(np.flatnonzero(y)[0]) for y in ys]
    written = [None if k % 2 else r if k % 3 else (r + 1) % 8 for k, r in enumerate(right)]
    # an LLM that puts the right character first among the top k: the two stages then agree with a right reader
    llm = lambda i, top: [5.0 if ys[i][j] else 0.0 for j in top]  # noqa: E731
    both = fit_ranker(xs, ys, 3, llm, written_first=written)
    alone = fit_ranker(xs, ys, 3, llm, written_first=written, written_only=True)
    first_agree = [alone.first(x)[0] == w for x, w in zip(xs, written)]
    for k, same in enumerate((True, False)):
        shown = np.mean([ys[i][w] for i, w in enumerate(written) if w is not None and first_agree[i] == same])
        assert alone.written_first[k] == pytest.approx(shown)
    assert alone.written_first != both.written_first  # (the LLM moved agreement: the two fits differ)
    assert alone.skips_llm(2) and not alone.skips_llm(None) and not both.skips_llm(2)

def test_a_written_mix_fit_keeps_a_surer_counted_answer_first():
    """`written_mix`: the written candidate takes its place by the share it was right; where counting is surer of
    its own first than that share, counting's first stays first (and the probabilities are the same numbers)."""
    xs, ys = _questions([2.0, -1.0, 0.5], 400, 5)
    right = [int(np.flatnonzero(y)[0]) for y in ys]
    written = [None if k % 2 else r if k % 3 else (r + 1) % 8 for k, r in enumerate(right)]
    first = fit_ranker(xs, ys, 8, written_first=written)
    mix = fit_ranker(xs, ys, 8, written_first=written, written_mix=True)
    assert mix.written_first == first.written_first
    sure = [x for x in xs if first.probabilities(x, None)[1][0] > 0.9][0]  # counting all but certain
    counted, _ = first.probabilities(sure, None)
    w = int(counted[4])
    o_first, p_first = first.probabilities(sure, None, w)
    o_mix, p_mix = mix.probabilities(sure, None, w)
    assert o_first[0] == w and o_mix[0] == counted[0] and o_mix[1] == w  # the written one next, not first
    assert sorted(p_mix) == pytest.approx(sorted(p_first)) and list(p_mix) == sorted(p_mix, reverse=True)
    unsure = min(xs, key=lambda x: first.probabilities(x, None)[1][0])  # counting unsure: the reader first
    assert first.probabilities(unsure, None)[1][0] < mix.written_first[1]
    w = int(first.probabilities(unsure, None)[0][3])
    assert mix.probabilities(unsure, None, w)[0][0] == w


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
    assert r.stage2[len(STAGE1)] > 1.0  # the LLM's weight
    x = x1[0]
    order, p = r.probabilities(x, llm(0, r.first(x)[:5]))
    assert order[0] == right[0] and p[0] > 0.5
    assert list(order[5:]) == list(r.first(x)[5:])  # outside the top k: stage 1's order
    assert p.sum() == pytest.approx(1.0) and p[:5].sum() == pytest.approx(r.p_in)


def test_character_features_name_the_share_the_context_and_the_question():
    chars = [{"id": 0, "count": 30}, {"id": 1, "count": 10}, {"id": 2, "count": 60}]
    ids, x = character_features(chars, Counter({1: 3}), {2}, {0: [2, 1]}, {1: [4, 0]}, network={0: -0.2, 2: -3.0},
                                written=[2, 0, 2])
    assert ids == [0, 1, 2] and x.shape == (3, len(STAGE1)) == (3, 10)
    np.testing.assert_allclose(np.exp(x[:, 0]), [0.3, 0.1, 0.6])
    np.testing.assert_allclose(x[:, 1], [0.0, np.log(4), 0.0])
    assert list(x[:, 2]) == [0.0, 0.0, 1.0]
    np.testing.assert_allclose(x[:, 3:5], [[np.log(3), np.log(2)], [0.0, 0.0], [0.0, 0.0]])  # its role matches
    np.testing.assert_allclose(x[:, 5:7], [[0.0, 0.0], [np.log(5), 0.0], [0.0, 0.0]])  # the same in the whole book
    assert list(x[:, 7]) == [-0.2, -3.0, -3.0]  # the network's; one it did not score gets the lowest it gave
    assert list(x[:, 8]) == [0.0, 0.0, 1.0] and list(x[:, 9]) == [1.0, 0.0, 1.0]  # written first; written at all
    s = with_llm(x, [-1.0, -2.0, -3.0])  # (3, 11): the LLM's scores log-softmaxed over the k names
    assert np.exp(s[:, 10]).sum() == pytest.approx(1.0) and s[0, 10] > s[1, 10] > s[2, 10]


def test_the_llm_feature_forms_and_their_choice_by_cross_validation():
    """Every LLM_FEATURES form is a function of the LLM's order and margins; the choice among them is made by the
    likelihood over the questions' own folds: an LLM whose log-likelihood gaps are huge but whose first choice is
    right 90% of the time is best entered bounded, not as the raw gap (which a single weight makes far too sure)."""
    l = [-1.0, -40.0, -3.0]
    for kind in LLM_FEATURES:
        f = with_llm(np.zeros((3, len(STAGE1))), l, kind)[:, len(STAGE1):]  # (3, m)
        assert f.shape[0] == 3 and f[0, 0] > f[2, 0] >= f[1, 0], kind  # the LLM's order is kept
    assert with_llm(np.zeros((3, 3)), l, "clipped")[1, 3] == -10.0
    with pytest.raises(ValueError, match="LLM feature"):
        with_llm(np.zeros((3, 3)), l, "raw")
    with pytest.raises(ValueError, match="LLM feature"):  # even without the LLM's scores to enter
        fit_ranker([np.zeros((4, 3))], [np.array([True, False, False, False])], 3, llm_features="raw")
    rng = np.random.default_rng(7)
    xs, ys, llms, groups = [], [], [], []
    for q in range(600):
        x = rng.normal(size=(8, len(STAGE1)))  # (C, 3)
        y = np.zeros(8, dtype=bool)
        right = int(np.argsort(-(x @ np.eye(len(STAGE1))[0]))[rng.integers(0, 3)])  # in stage 1's top 3
        y[right] = True
        llm = rng.normal(scale=1.0, size=8) - 60.0 * rng.random(8)  # gaps of tens of nats, mostly noise
        llm[right if rng.random() < 0.9 else (right + 1) % 8] = 5.0  # its first choice: right 90% of the time
        xs.append(x), ys.append(y), llms.append(llm), groups.append(q % 5)
    kind, loss = select_llm_features(xs, ys, groups, 5, lambda i, top: list(llms[i][top]))
    assert set(loss) == set(LLM_FEATURES) and loss[kind] == min(loss.values())
    assert kind != "log_softmax" and loss["log_softmax"] > loss[kind]
    r = fit_ranker(xs, ys, 5, lambda i, top: list(llms[i][top]), llm_features=kind)
    assert r.llm_features == kind and len(r.stage2) == len(STAGE1) + LLM_FEATURES[kind](np.zeros(5)).shape[1]
    order, p = r.probabilities(xs[0], list(llms[0][r.first(xs[0])[:5]]))
    assert r.right_probability(xs[0], ys[0], list(llms[0][r.first(xs[0])[:5]])) == pytest.approx(p[ys[0][order]].sum())


def test_the_ece_of_a_calibrated_ranker_on_few_questions_is_not_zero_and_is_told():
    """ece_if_calibrated: what a perfectly calibrated ranker shows on this many questions; a ranker whose answers do
    come true at its confidence falls inside it, one twice too sure does not."""
    from whoqa.core.calibration import ece_if_calibrated
    rng = np.random.default_rng(6)
    conf = rng.uniform(0.1, 0.5, size=254)
    ref = ece_if_calibrated(conf, draws=500)
    assert 0.01 < ref["mean"] < ref["p95"] < 0.12
    assert ece(conf, rng.random(254) < conf) < ref["p95"] + 0.02
    assert ece(conf, rng.random(254) < conf / 2) > ref["p95"]
    assert ece_if_calibrated(conf, draws=50) == ece_if_calibrated(conf, draws=50)  # seeded


def test_a_fit_made_with_other_features_is_refused_with_one_line(tmp_path):
    """A fit records its feature list and the registry's version; `served_fit` refuses one that does not match
    (before, a changed feature set failed at ask time as a matrix-shape error), and passes over a damaged one."""
    import json
    from whoqa.ranker.fits import fit_dir, save_fit, served_fit, shipped_fit
    shipped = shipped_fit()
    assert shipped.ranker.features["stage1"] == list(SERVED) and shipped.ranker.version == FEATURE_VERSION
    assert shipped.ranker.cast  # measured best with the LLM: the book's cast, with its roles (docs/who-ranker.md)
    assert shipped.provenance["book_level_cv"]["p@1"] == 32.68 and shipped.ranker.llm_prompt()["shots"] == 0 and shipped.provenance["command"]  # (who-ranker.md)
    assert shipped.ranker.written_first and shipped.ranker.written_only  # reading first (issue 63)
    assert shipped.ranker.prompt["written_again"] and shipped.ranker.written_passages().fusion == "pool"
    folder = fit_dir(tmp_path, "features+by-book", "m", 5, "features")
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text("{")  # damaged: passed over, the shipped fit serves
    assert served_fit(tmp_path, "m").where == shipped.where
    other = {**json.loads(Path(shipped.where).read_text())["ranker"], "stage1": [0.5, 0.3, -1.0, 0.2],
             "features": {"stage1": list(STAGE1) + ["chapter"], "stage2": []}}
    save_fit(folder, {"ranker": other})
    with pytest.raises(ValueError, match=r"made with features .*chapter.*whoqa rerank --candidates features"):
        served_fit(tmp_path, "m")
    weights = [0.5, 0.3, -1.0, 0.4, 0.2, 0.3, 0.1, 0.1, 0.2, 0.1][:len(STAGE1)]  # one per feature of the registry
    save_fit(folder, {"ranker": {**other, "stage1": weights, "features": {"stage1": list(STAGE1)},
                                 "version": FEATURE_VERSION + 1}})
    with pytest.raises(ValueError, match="version"):
        served_fit(tmp_path, "m")
    save_fit(folder, {"ranker": {**other, "stage1": weights, "features": {"stage1": list(STAGE1)}}})
    assert served_fit(tmp_path, "m").ranker.stage1 == weights


def test_of_a_runs_fits_the_better_cross_validated_one_serves(tmp_path):
    """k = 10 sorts before k = 5 by name; the service serves the fit whose book-level CV measured the higher P@1."""
    import json
    from whoqa.ranker.fits import fit_dir, save_fit, served_fit, shipped_fit
    ranker = json.loads(Path(shipped_fit().where).read_text())["ranker"]
    for k, p1 in ((10, 25.07), (5, 27.56)):
        folder = fit_dir(tmp_path, "features+by-book", "m", k, "features")
        folder.mkdir(parents=True)
        save_fit(folder, {"ranker": {**ranker, "top_k": k}, "combined": {"p@1": p1, "p@5": 70.0, "mrr": 0.4},
                          "by_book_folds": True})
    got = served_fit(tmp_path, "m")
    assert got.ranker.top_k == 5 and "+k5+" in got.where and got.provenance["cv"]["p@1"] == 27.56


def test_a_saved_fit_with_fields_this_whoqa_does_not_know_is_one_line(tmp_path):
    """A fit saved by another whoqa (a field this one lacks) is a ValueError naming the file and the fix, not a
    TypeError from the dataclass; one without the newer `prompt` field reads as made with the default prompt."""
    from dataclasses import asdict
    from whoqa.ranker.fits import saved_ranker, shipped_fit
    from whoqa.ranker.config import RerankConfig
    saved = asdict(shipped_fit().ranker)
    with pytest.raises(ValueError, match=r"summary.json was made by another version of whoqa \(fields temperature\)"):
        saved_ranker({**saved, "temperature": 1.3}, "summary.json")
    old = {k: v for k, v in saved.items() if k != "prompt"}
    assert saved_ranker(old, "old.json").llm_prompt() == {"passages": RerankConfig.passages,
                                                          "prompt_tokens": RerankConfig.prompt_tokens,
                                                          "shots": RerankConfig.shots, "weights": None, "llm": None,
                                                          "shot_policy": "question", "examples": None}
