import json

import pytest

from whoqa.evaluation.baselines import book_frequency, context_frequency, random_ranking
from whoqa.core.workspace import MissingStage
from whoqa.evaluation.evaluate import EvalConfig, evaluate

CHARS = {"b1": [{"id": 1, "name": "Anna", "count": 50}, {"id": 2, "name": "Peter", "count": 50},
                {"id": 0, "name": "NARRATOR", "count": 80}, {"id": 3, "name": "Olga", "count": 5}],
         "b2": []}


def test_baselines_deterministic_ties():
    assert book_frequency(CHARS["b1"]) == [0, 1, 2, 3]
    assert random_ranking(CHARS["b1"], 13, 7) == random_ranking(CHARS["b1"], 13, 7)
    assert sorted(random_ranking(CHARS["b1"], 13, 7)) == [0, 1, 2, 3]
    assert context_frequency([3, 3, 2], CHARS["b1"]) == [3, 2, 0, 1]


def write_ws(ws):
    (ws / "who").mkdir(parents=True)
    (ws / "who" / "characters.json").write_text(json.dumps(CHARS))
    qs = [{"question_id": 0, "document_id": "b1", "question": "Who?", "answer1": "Anna", "answer2": "anna",
           "answers": [1]},
          {"question_id": 1, "document_id": "b1", "question": "Who?", "answer1": "the narrator", "answer2": "x",
           "answers": [0]},
          {"question_id": 2, "document_id": "b2", "question": "Who?", "answer1": "y", "answer2": "y", "answers": [5]}]
    (ws / "who" / "who_questions.json").write_text(json.dumps(qs))


def test_eval_writes_results_with_config_and_fingerprint(tmp_path):
    ws = tmp_path / "ws"
    write_ws(ws)
    res = evaluate(EvalConfig(str(ws), random_trials=3))
    bf = res["results"]["book_frequency"]
    # b1 ranking [0, 1, 2, 3]: q0 correct at rank 2, q1 at rank 1; b2 has no candidates: skipped, counted
    assert bf["p@1"] == 50.0 and bf["p@5"] == 100.0 and bf["mrr"] == pytest.approx(0.75)
    assert bf["skipped_no_candidates"] == 1 and bf["questions"] == 2
    assert res["results"]["random"]["trials"] == 3
    saved = json.loads((ws / "results" / "book_frequency.json").read_text())
    assert saved["config"]["seed"] == 13 and len(saved["data_fingerprint"]) == 16
    assert saved["text"]["n"] == 2 and saved["text"]["em"] == 50.0  # "NARRATOR" for both: q1 says "the narrator"
    assert "P@1" in (ws / "results" / "table.txt").read_text()


def test_eval_without_who_set_says_what_to_run(tmp_path):
    with pytest.raises(MissingStage, match="whoqa prepare"):
        evaluate(EvalConfig(str(tmp_path)))


def test_eval_on_another_folder_prepares_it(mini_data, tmp_path):
    from tests.conftest import DYING_DETECTIVE, write_qaps
    write_qaps(mini_data, [(DYING_DETECTIVE, "Who pretends to be dying?", "Sherlock Holmes", "Holmes"),
                           (DYING_DETECTIVE, "Who is the narrator?", "Dr. Watson", "Watson")])
    ws = tmp_path / "ws"
    res = evaluate(EvalConfig(str(ws), data=str(mini_data), random_trials=2))
    assert res["meta"]["questions"] == 2 and res["meta"]["books"] == 1
    assert (ws / "eval-data" / "data" / "books" / DYING_DETECTIVE / f"{DYING_DETECTIVE}.book").is_file()
    assert (ws / "results" / "book_frequency@data.json").is_file()
    # Holmes is the most mentioned character: book frequency answers the first question at rank 1
    assert res["results"]["book_frequency"]["p@5"] == 100.0
    # what `ask` serves there, with the LLM install.sh installs (or its first stage where none is): calibrated
    served = res["results"]["served:features"]
    assert served["questions"] == 2 and served["route"] == ["features"] and served["ece"] is not None


def test_span_recall():
    from whoqa.evaluation.evaluate import span_recall
    ctx = "then the doctor opened a small ivory box and looked inside".split()
    assert span_recall(ctx, ["a small ivory box", "x"]) == 1.0
    # best 3-token span for "a wooden box": "a small ivory" (LCS 1: 'a') vs "ivory box and" (LCS 1: 'box')
    assert span_recall(ctx, ["a wooden box"]) == pytest.approx(1 / 3)
    assert span_recall(ctx, ["Smith"]) == 0.0


def test_eval_reports_coverage_and_context_frequency(mini_data, dd_ws):
    from data_prep.prepare import PrepareConfig, prepare
    from tests.conftest import DYING_DETECTIVE, write_qaps
    from whoqa.retrieval.contexts import build_contexts
    write_qaps(mini_data, [(DYING_DETECTIVE, "Who does Holmes send Watson to fetch?", "Culverton Smith",
                            "Mr. Culverton Smith"),
                           (DYING_DETECTIVE, "What did Smith send to Holmes?", "a small ivory box", "an ivory box")])
    ws = dd_ws
    prepare(PrepareConfig(str(mini_data), str(ws), books=[DYING_DETECTIVE], artificial=False, embeddings=False),
            progress=False)
    build_contexts(ws, "bm25f", progress=False)
    res = evaluate(EvalConfig(str(ws), random_trials=2))
    cov = res["meta"]["coverage"]["bm25f"]
    assert cov["who_questions"] == 1 and cov["who_answer_in_context"] == 100.0  # Smith is all over his scenes
    assert cov["all_questions"] == 2 and 50.0 <= cov["answer_rouge_l_recall"] <= 100.0
    assert "context_frequency[bm25f]" in res["results"] and "bm25f contexts" in res["table"]


def test_half_built_ranker_is_left_out(tmp_path):
    ws = tmp_path / "ws"
    write_ws(ws)
    (ws / "contexts" / "bert").mkdir(parents=True)
    (ws / "contexts" / "bert" / "b2.json").write_text('{"questions": {}}')  # b1 not ranked yet
    res = evaluate(EvalConfig(str(ws), random_trials=2))
    assert "context_frequency[bert]" not in res["results"]
    assert res["meta"]["incomplete_rankers"] == {"bert": "contexts for 1 of 2 books"}
    assert "whoqa index --ranker bert" in res["table"]


def test_ensemble_averages_each_folds_trials():
    """Two trials that disagree: the ensemble ranks by their summed probabilities, so a character both put second
    with much mass can beat each trial's narrow favourite."""
    from whoqa.evaluation.evaluate import ensemble_result
    p = lambda qid, ranking, probs, ans: {"question_id": qid, "book": "b", "ranking": ranking, "probs": probs,  # noqa: E731
                                          "answers": ans}
    runs = [{"fold": 0, "trial": 0, "predictions": [p(1, [1, 2, 3], [0.5, 0.45, 0.05], [2]),
                                                    p(2, [3, 1], [0.9, 0.1], [3])]},
            {"fold": 0, "trial": 1, "predictions": [p(1, [3, 2, 1], [0.5, 0.45, 0.05], [2]),
                                                    p(2, [1, 3], [0.6, 0.4], [3])]}]
    qmap = {1: {"answer1": "Bo", "answer2": "Bo"}, 2: {"answer1": "Cy", "answer2": "Cy"}}
    names = {"b": {1: "Al", 2: "Bo", 3: "Cy"}}
    res = ensemble_result("memnet[bm25f]", runs, qmap, names, {"config": {}, "provenance": None})
    assert res["system"] == "ensemble:memnet[bm25f]" and res["members"] == 2 and res["questions"] == 2
    assert res["p@1"] == 100.0  # q1: 2 has 0.9 vs 0.55; q2: 3 has 1.3 vs 0.7 (each trial alone: 50)
    assert res["text"]["em"] == 100.0


def test_failure_report_says_why_a_question_was_missed(mini_data, dd_ws):
    """A run that answers "Who does Holmes send Watson to fetch?" with Holmes: the report counts it as picking a
    character the question names, with the answer (Culverton Smith) in the context, and shows it as an example."""
    import json
    from data_prep.prepare import PrepareConfig, prepare
    from whoqa.core.store import load_who_set
    from tests.conftest import DYING_DETECTIVE, write_qaps
    from whoqa.evaluation.failures import failure_report
    from whoqa.retrieval.contexts import build_contexts
    write_qaps(mini_data, [(DYING_DETECTIVE, "Who does Holmes send Watson to fetch?", "Culverton Smith",
                            "Mr. Culverton Smith")])
    prepare(PrepareConfig(str(mini_data), str(dd_ws), books=[DYING_DETECTIVE], artificial=False, embeddings=False),
            progress=False)
    build_contexts(dd_ws, "bm25f", progress=False)
    characters, questions = load_who_set(dd_ws)
    ids = {c["name"]: c["id"] for c in characters[DYING_DETECTIVE]}
    holmes = next(i for n, i in ids.items() if "Holmes" in n)
    q = questions[0]
    run = dd_ws / "runs" / "memnet[bm25f]"
    run.mkdir(parents=True)
    (run / "fold0_trial0.json").write_text(json.dumps({"fold": 0, "trial": 0, "predictions": [
        {"question_id": q["question_id"], "book": DYING_DETECTIVE, "ranking": [holmes] + q["answers"],
         "answers": q["answers"]}]}))
    rep = failure_report(dd_ws, "memnet[bm25f]")
    f = rep["facts"]
    assert rep["questions"] == 1 and rep["p@1"] == 0.0
    assert f["picked a character the question names"]["questions"] == 1
    assert f["answer not in context"]["questions"] == 0 and f["answer named in the question"]["questions"] == 0
    assert f["picked a character the question names"]["missed"][0]["gold"] == "Culverton Smith"
    assert (dd_ws / "results" / "failures-memnet[bm25f].txt").is_file()
    with pytest.raises(ValueError, match="without probabilities"):  # no probabilities recorded: no average to explain
        failure_report(dd_ws, "ensemble:memnet[bm25f]")
