from data_prep.litbank import align, b3, ceafe, evaluate, f1, muc


def test_muc_hand_worked():
    # key {a,b,c}; response {a,b},{c}: recall (3-2)/(3-1)=0.5; precision (2-1 + 0)/(1+0)=1
    key, resp = [{"a", "b", "c"}], [{"a", "b"}, {"c"}]
    assert f1(*muc(key, resp)) == {"p": 100.0, "r": 50.0, "f1": 66.67}


def test_b3_hand_worked():
    key, resp = [{"a", "b", "c"}], [{"a", "b"}, {"c"}]
    # recall: (4/3 + 1/3)/3 = 5/9; precision: (4/2 + 1/1)/3 = 1
    assert f1(*b3(key, resp)) == {"p": 100.0, "r": 55.56, "f1": 71.43}


def test_ceafe_hand_worked():
    key, resp = [{"a", "b", "c"}, {"d"}], [{"a", "b"}, {"c", "d"}]
    # best alignment: {a,b,c}-{a,b} 0.8 and {d}-{c,d} 2/3: total 1.4667 over 2 and 2
    r = f1(*ceafe(key, resp))
    assert r["p"] == r["r"] == 73.33


def test_align_lenient_on_titles():
    gold = {(0, 1): ("HOLMES", "PROP"), (5, 5): ("HOLMES", "PRON")}
    pred = {(1, 1): (3, "PROP"), (5, 5): (3, "PRON"), (8, 8): (4, "PRON")}
    out = align(pred, gold)
    assert out[(0, 1)] == (3, "PROP") and out[(5, 5)] == (3, "PRON") and ("pred", 8, 8) in out


def test_evaluate_one_document(engine, shared_data):
    res = evaluate(shared_data / "litbank" / "coref", max_docs=2, engine=engine)
    assert res["documents"] == 2
    assert 20 < res["conll_f1"] <= 100 and 0 < res["pronoun_accuracy"] <= 100
    assert res["mentions"]["aligned"] <= res["mentions"]["predicted"]


def test_malformed_ann_is_a_clear_error(tmp_path):
    import pytest
    from data_prep.litbank import load_litbank
    from whoqa.core.text import DataError
    (tmp_path / "x.txt").write_text("Anna sold her house .\n")
    (tmp_path / "x.ann").write_text("MENTION\tT1\t0\tzero\t0\t0\tAnna\tPER\tPROP\n")
    with pytest.raises(DataError, match="x.ann line 1 is malformed"):
        load_litbank(tmp_path)
    (tmp_path / "x.ann").write_text("this is not brat\n")
    with pytest.raises(DataError, match="no MENTION records"):
        load_litbank(tmp_path)


def test_scores_per_document_fold_show_the_spread():
    """eval-coref's per-fold figures: each fold summed over its own documents only (the folds --resolver learned
    holds out), with their mean and sd."""
    import numpy as np
    from data_prep.litbank import by_fold, doc_folds

    def doc(good):  # (recall num, den, precision num, den) per metric; pronouns (ok, total, named)
        r = 10.0 if good else 5.0
        return {m: np.array([r, 10.0, r, 10.0]) for m in ("muc", "b3", "ceafe", "names_b3")} | {
            "pronouns": np.array([r, 10.0, 10.0]), "mentions": np.array([10.0, 10.0, 10.0])}
    counts = [doc(j in doc_folds(10, 5)[0]) for j in range(10)]  # the documents of fold 0 are perfect
    out = by_fold(counts)
    assert [f["conll_f1"] for f in out["per_fold"]] == [100.0, 50.0, 50.0, 50.0, 50.0]
    assert out["conll_f1"]["mean"] == 60.0 and out["conll_f1"]["sd"] == round(float(np.std([100, 50, 50, 50, 50],
                                                                                              ddof=1)), 2)
    assert out["pronoun_accuracy_named_entities"]["mean"] == 60.0
