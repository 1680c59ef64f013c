"""Metrics pinned to hand-worked examples; the nlg-eval values were also checked against pycocoevalcap's scorers
(the code nlg-eval runs) on 200 random cases when this was written."""
import pytest

from whoqa.core.metrics import (corpus_bleu, exact_match, meteor, normalize_text, ranking_metrics, rouge_l,
                                text_metrics, token_f1)


def test_ranking_metrics_best_ranked_correct_counts():
    rankings = [[3, 1, 2], [5, 4, 3, 2, 1, 9], [1, 2], [7, 8, 9, 10, 11, 12]]
    correct = [[1, 2], [9], [1], [12]]
    m = ranking_metrics(rankings, correct)
    # ranks: 2, 6, 1, 6 -> P@1 1/4, P@5 2/4, MRR (1/2 + 1/6 + 1 + 1/6) / 4
    assert m["p@1"] == 25.0 and m["p@5"] == 50.0
    assert m["mrr"] == pytest.approx((0.5 + 1 / 6 + 1 + 1 / 6) / 4)


def test_ranking_metrics_unranked_answer_scores_zero():
    assert ranking_metrics([[1, 2]], [[3]]) == {"p@1": 0.0, "p@5": 0.0, "mrr": 0.0, "n": 1}


def test_rouge_l_hand_worked_several_references():
    # hyp 4 tokens; 'dr . watson': LCS 1 -> p 1/4, r 1/3; 'watson': LCS 1 -> p 1/4, r 1
    # best p 1/4, best r 1: F = 2.44 * 0.25 / (1 + 1.44 * 0.25) = 0.448529
    assert rouge_l("the doctor , watson", ["dr . watson", "watson"]) == pytest.approx(0.448529, abs=1e-6)
    assert rouge_l("sherlock holmes", ["holmes", "sherlock holmes"]) == 1.0
    assert rouge_l("", ["holmes"]) == 0.0


def test_meteor_hand_worked_stems_order_and_references(monkeypatch):
    """METEOR = Fmean (1 - 0.5 (chunks / matches)^3), Fmean = 10 P R / (R + 9 P); max over references."""
    import whoqa.core.metrics as metrics
    monkeypatch.setattr(metrics, "wordnet", lambda: None)  # the same figures with or without WordNet's data here
    # 4 matches, P = R = 1; 'he went' and 'to london' are 2 chunks: 1 - 0.5 * (2/4)^3 = 0.9375
    assert meteor(["he went to london"], [["to london he went"]]) == (pytest.approx(93.75), False)
    # dogs ~ dog, running ~ runs by Porter stems: 3 matches in 1 chunk: 1 - 0.5 * (1/3)^3 = 0.981481
    assert meteor(["the dog runs"], [["a cat", "the dogs running"]])[0] == pytest.approx(98.148148, abs=1e-5)
    # 1 match of 2 hypothesis and 4 reference words: P 1/2, R 1/4, Fmean = 10/8 / (1/4 + 9/2) = 0.263158;
    # 1 chunk of 1 match: x (1 - 0.5) = 0.131579
    assert meteor(["holmes smiled"], [["mr sherlock holmes laughed"]])[0] == pytest.approx(13.1579, abs=1e-4)
    assert meteor(["nobody"], [["holmes"]])[0] == 0.0
    assert set(text_metrics(["watson"], [["watson"]])) >= {"meteor", "meteor_synonyms"}


def test_bleu_matches_nlg_eval_to_4_decimals():
    hyps = ["mr . culverton smith", "his brother"]
    refs = [["culverton smith", "smith"], ["mycroft holmes", "his brother mycroft"]]
    b = corpus_bleu(hyps, refs)
    # values from pycocoevalcap Bleu(4) on the same input
    assert [round(x, 4) for x in b] == [0.6667, 0.5774, 0.0, 0.0]
    # by hand: unigrams 3 + 2 matched of 4 + 2 -> 5/6... clipped: 'culverton','smith' (2), 'his','brother' (2) = 4/6
    # brevity: closest refs 2 and 3 (len 4 -> 'culverton smith'=2 vs 'smith'=1 -> 2; len 2 -> 2): ratio 6/4 >= 1
    assert b[0] == pytest.approx(4 / 6, abs=1e-6)


def test_bleu_brevity_penalty_closest_reference():
    b = corpus_bleu(["holmes"], [["sherlock holmes", "mr . sherlock holmes"]])
    # closest ref length 2; precision 1; BP = exp(1 - 2/1)
    assert b[0] == pytest.approx(0.367879, abs=1e-6)


def test_em_f1_squad_normalisation():
    assert exact_match("The Doctor.", ["doctor", "watson"]) == 1.0
    assert token_f1("Dr Watson", ["Watson", "Holmes"]) == pytest.approx(2 / 3)
    assert token_f1("", ["the"]) == 1.0  # both normalise to nothing
    assert token_f1("", ["Watson"]) == 0.0


def test_text_metrics_normalises_and_checks_shapes():
    m = text_metrics(["Holmes."], [["holmes .", "Sherlock"]])
    assert normalize_text("Holmes's friend, Watson!") == "holmes ' s friend , watson !"
    assert m["rouge_l"] == 100.0 and m["em"] == 100.0 and m["rouge_l_f1_rouge_score"] == 100.0
    with pytest.raises(ValueError, match="no reference"):
        text_metrics(["x"], [[]])
    with pytest.raises(ValueError, match="1 predictions but 2"):
        text_metrics(["x"], [["a"], ["b"]])


def test_score_cli(tmp_path):
    from typer.testing import CliRunner
    from cli import app
    (tmp_path / "p.txt").write_text("sherlock holmes\nhe\n")
    (tmp_path / "r1.txt").write_text("holmes\nmrs . hudson\n")
    (tmp_path / "r2.txt").write_text("sherlock holmes\nhudson\n")
    res = CliRunner().invoke(app, ["score", "--pred", str(tmp_path / "p.txt"), "--ref", str(tmp_path / "r1.txt"),
                                   "--ref", str(tmp_path / "r2.txt"), "--raw"])
    assert res.exit_code == 0, res.output
    import json
    out = json.loads(res.output)
    assert out["rouge_l"] == pytest.approx(50.0) and out["n"] == 2
    (tmp_path / "r3.txt").write_text("one line\n")
    res = CliRunner().invoke(app, ["score", "--pred", str(tmp_path / "p.txt"), "--ref", str(tmp_path / "r3.txt")])
    assert res.exit_code == 2 and "1 lines but" in res.output


def test_score_cli_counts_lines_alike_and_refuses_empty_files(tmp_path):
    from typer.testing import CliRunner
    from cli import app
    (tmp_path / "p.txt").write_text("holmes\nwatson")  # no final newline
    (tmp_path / "r.txt").write_text("holmes\nwatson\n")
    res = CliRunner().invoke(app, ["score", "--pred", str(tmp_path / "p.txt"), "--ref", str(tmp_path / "r.txt")])
    assert res.exit_code == 0 and '"n": 2' in res.output, res.output
    (tmp_path / "e1.txt").write_text("")
    (tmp_path / "e2.txt").write_text("")
    res = CliRunner().invoke(app, ["score", "--pred", str(tmp_path / "e1.txt"), "--ref", str(tmp_path / "e2.txt")])
    assert res.exit_code == 2 and "no lines" in res.output


def test_a_book_bootstrap_spreads_by_book_and_centres_the_difference():
    """Two systems on 3 books x 4 questions: a is right on every question of books 0 and 1, b on book 0 only. The
    difference in P@1 is 33.3 points, its interval stays within what resampling 3 books can give (0 to 100), and a
    system compared with itself differs by exactly 0."""
    from whoqa.core.metrics import book_bootstrap
    books = [d for d in "xyz" for _ in range(4)]
    correct = [[1]] * 12
    a = [[1, 2] if d in "xy" else [2, 1] for d in books]
    b = [[1, 2] if d == "x" else [2, 1] for d in books]
    s = book_bootstrap(a, b, correct, books, samples=500)
    d = s["difference"]["p@1"]
    assert s["books"] == 3 and abs(d["mean"] - 100 / 3) < 1e-3 and 0 <= d["ci95"][0] <= d["ci95"][1] <= 100
    assert s["sd"]["p@1"] > 0 and s["difference"]["p@5"]["mean"] == 0
    same = book_bootstrap(a, a, correct, books, samples=100)["difference"]["mrr"]
    assert same == {"mean": 0.0, "sd": 0.0, "ci95": [0.0, 0.0]}
