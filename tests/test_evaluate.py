import json

import pytest

from whoqa.baselines import book_frequency, context_frequency, random_ranking
from whoqa.evaluate import EvalConfig, MissingStage, evaluate

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
    from tests.conftest import DYING_DETECTIVE
    (mini_data / "narrativeqa" / "qaps.csv").write_text(
        "document_id,set,question,answer1,answer2\n"
        f"{DYING_DETECTIVE},test,Who pretends to be dying?,Sherlock Holmes,Holmes\n"
        f"{DYING_DETECTIVE},test,Who is the narrator?,Dr. Watson,Watson\n")
    ws = tmp_path / "ws"
    res = evaluate(EvalConfig(str(ws), data=str(mini_data), random_trials=2))
    assert res["meta"]["questions"] == 2 and res["meta"]["books"] == 1
    assert (ws / "eval-data" / "data" / "books" / DYING_DETECTIVE / f"{DYING_DETECTIVE}.book").is_file()
    assert (ws / "results" / "book_frequency@data.json").is_file()
    # Holmes is the most mentioned character: book frequency answers the first question at rank 1
    assert res["results"]["book_frequency"]["p@5"] == 100.0
