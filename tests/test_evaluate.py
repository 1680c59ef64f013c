import json

import pytest

from whoqa.evaluation.baselines import book_frequency, context_frequency, random_ranking
from tests.conftest import DYING_DETECTIVE
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


def test_eval_on_another_folder_prepares_it(mini_data, tmp_path, caplog):
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
    # what `ask` serves there, with the LLM install.sh installs (or its first stage where none is): calibrated where
    # that reader is the one the shipped fit was measured with, and otherwise no probability, said with the command
    # that measures it (a machine where llama.cpp cannot run serves the 0.5B through gpt4all)
    served = res["results"]["served:features"]
    assert served["questions"] == 2 and served["route"] == ["features"]
    assert served["ece"] is not None or any("whoqa measure-reader" in r.getMessage() for r in caplog.records)


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


OTHER_ROWS = [(DYING_DETECTIVE, "Who pretends to be dying?", "Sherlock Holmes", "Holmes"),
              (DYING_DETECTIVE, "What did Smith send to Holmes?", "a small ivory box", "an ivory box"),
              (DYING_DETECTIVE, "Why does Holmes refuse food and water?", "to look ill", "to appear to be dying"),
              (DYING_DETECTIVE, "Where does Culverton Smith live?", "Lower Burke Street", "in Lower Burke Street"),
              (DYING_DETECTIVE, "What xylophones the quagga?", "nothing", "none")]  # no word of it in the book


def _other_records(ws):
    """The per-question records of the non-Who answers `eval --data` wrote, by question id."""
    files = sorted((ws / "eval-data" / "data" / "served").glob("other-*.jsonl"))
    assert len(files) == 1, files
    return {r["question_id"]: r for r in map(json.loads, files[0].read_text().splitlines())}


def test_eval_data_judges_the_non_who_questions_as_ask_serves_them(mini_data, tmp_path, tiny_llm_path, monkeypatch):
    """`eval --data` with Who and other questions: the Who rows as before, and a row for the others answered by the
    service as `ask` answers them (here the tiny LLM reading the passages), with ROUGE-L / METEOR / BLEU-1 over every
    question and over the answered ones and the share answered; per question, the route, answer (or "not found",
    the withheld text apart) are what `Service.answer` gives for the same question, and one matching nothing is
    refused. A second run, only the other questions (--kinds other), reuses those answers: nothing is asked again."""
    from tests.conftest import write_qaps
    from whoqa.evaluation.unseen import served_service
    from whoqa.service import Service
    write_qaps(mini_data, OTHER_ROWS)
    ws = tmp_path / "ws"
    cfg = EvalConfig(str(ws), data=str(mini_data), random_trials=2, llm=tiny_llm_path, device="cpu", jobs=1)
    res = evaluate(cfg)
    assert res["meta"]["questions"] == 1 and "served:features" in res["results"]  # the Who set: its one question
    assert not any(n.startswith("served-other") for n in res["results"])
    row = res["other"]["served-other:llm"]
    assert row["questions"] == 4 and row["books"] == 1 and row["refused"] == 1
    assert row["answered"] + row["not_found"] + row["refused"] == 4
    assert row["answer_coverage"] == pytest.approx(100 * row["answered"] / 4)
    assert {"rouge_l", "meteor", "bleu_1"} <= set(row["text"]) and row["text"]["n"] == 4
    assert row["text_answered"]["n"] == row["answered"]
    saved = json.loads((ws / "results" / "served-other:llm@data.json").read_text())
    assert saved["answer_coverage"] == row["answer_coverage"] and saved["config"]["kinds"] == "who,other"
    table = (ws / "results" / "table@data.txt").read_text()
    assert "Non-Who questions, served as `ask` serves them: 4 questions" in table and "METEOR" in table
    assert table.startswith("Who set: 1 questions")
    records = _other_records(ws)
    target = ws / "eval-data" / "data"
    qs = {q["question_id"]: q for q in json.loads((target / "questions.json").read_text())}
    assert set(records) == {i for i, q in qs.items() if not q["question"].startswith("Who")}
    served = Service(target, served_service(ws, target, tiny_llm_path, "cpu").cfg, fits_from=ws)  # as `ask` would
    for qid, r in records.items():
        q = qs[qid]
        assert r["book"] == q["document_id"] and r["word"] in ("what", "why", "where")
        if "quagga" in q["question"]:
            assert r["route"] == "refused" and r["answer"] is None and not r["found"]
            continue
        a = served.answer(q["document_id"], q["question"])
        assert (r["route"], r["reason"], r["model"]) == (a.route, a.reason, a.model) and a.route == "llm"
        assert (r["answer"], r["found"], r["support"], r["withheld"]) == (a.answer, a.found, a.support, a.withheld)
        assert row["answers"][str(qid)] == (a.answer if a.found else None)
    monkeypatch.setattr(Service, "answer", lambda *a, **k: pytest.fail("asked again: the answers were not reused"))
    again = evaluate(EvalConfig(str(ws), data=str(mini_data), llm=tiny_llm_path, device="cpu", jobs=1, kinds="other"))
    assert again["results"] == {} and again["table"].startswith("Who set: not judged (--kinds other)")
    assert again["other"]["served-other:llm"]["text"] == row["text"] and _other_records(ws) == records
    first = evaluate(EvalConfig(str(ws), data=str(mini_data), llm=tiny_llm_path, device="cpu", jobs=1, kinds="other",
                                other_per_book=2))  # each book's first 2: their own file, the whole one kept
    assert first["other"]["served-other:llm"]["questions"] == 2
    assert set(first["other"]["served-other:llm"]["answers"]) == {str(i) for i in list(records)[:2]}
    assert json.loads((ws / "results" / "served-other:llm@data-first2.json").read_text())["questions"] == 2
    assert saved["questions"] == json.loads((ws / "results" / "served-other:llm@data.json").read_text())["questions"]
    with pytest.raises(ValueError, match="--other-per-book 0"):
        EvalConfig(str(ws), data=str(mini_data), kinds="other", other_per_book=0).judged()


def test_the_scores_of_non_who_answers_count_not_found_and_refused_as_unanswered():
    """Coverage is the share found; the metrics over every question score an unanswered one as an empty answer, those
    over the answered ones leave it out."""
    from whoqa.core.metrics import text_metrics
    from whoqa.evaluation.unseen import format_other, other_scores
    rows = [{"route": "llm", "found": True, "answer": "an ivory box"},
            {"route": "llm", "found": False, "answer": None, "withheld": "a small ivory box"},  # not shown: unanswered
            {"route": "refused", "found": False, "answer": None}]
    refs = [["a small ivory box", "an ivory box"], ["a small ivory box", "x"], ["y", "z"]]
    got = other_scores(rows, refs)
    assert (got["questions"], got["answered"], got["not_found"], got["refused"]) == (3, 1, 1, 1)
    assert got["answer_coverage"] == pytest.approx(100 / 3) and got["routes"] == {"llm": 2, "refused": 1}
    assert got["text"] == text_metrics(["an ivory box", "", ""], refs)
    assert got["text_answered"] == text_metrics(["an ivory box"], refs[:1]) and got["text_answered"]["rouge_l"] == 100
    line = format_other({"served-other:llm": {**got, "books": 1}}).splitlines()[-1]
    assert line.split()[:2] == ["served-other:llm", "33.3%"] and line.split()[-3] == "100.00"


def test_kinds_are_checked_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="give who, other or who,other"):
        evaluate(EvalConfig(str(tmp_path), data=str(tmp_path / "nowhere"), kinds="who,what"))
    with pytest.raises(ValueError, match="give --data DIR"):
        evaluate(EvalConfig(str(tmp_path), kinds="other"))
    assert EvalConfig(str(tmp_path), data="d").judged() == {"who", "other"}
    with pytest.raises(ValueError, match="unknown passage retrieval"):  # --passages: before any book is prepared
        evaluate(EvalConfig(str(tmp_path), data=str(tmp_path / "nowhere"), passages="nope"))
    from whoqa.evaluation.unseen import served_service
    assert served_service(tmp_path, tmp_path / "t", "none", "cpu", "pool").cfg.passages.fusion == "pool"


def test_eval_data_serves_the_training_workspaces_reader_of_passages(mini_data, tmp_path, tiny_reader_path):
    """The training workspace's final FiD readers, fid[none] (the question alone) measured best: a book of --data
    (one it never trained on) gets fid[bm25f], the reader of its passages that the route names, loaded from the
    training workspace (the books' own workspace holds no model), never fid[none]."""
    from tests.conftest import write_qaps
    from whoqa.reader.model import FiDReader
    ws = tmp_path / "ws"
    base = FiDReader.load(tiny_reader_path, "cpu")
    for name, context, score in (("fid[none]", "none", 40.0), ("fid[bm25f]", "bm25f", 20.0)):
        base.save(ws / "models" / "reader" / name / "final", {"config": {"context": context, "answer_tokens": 8,
                                                                         "max_new_tokens": 4, "num_beams": 1}})
        (ws / "reader" / "runs" / name).mkdir(parents=True)
        (ws / "reader" / "runs" / name / "summary.json").write_text(json.dumps({"metrics": {"rouge_l": score}}))
    write_qaps(mini_data, OTHER_ROWS[1:3])
    res = evaluate(EvalConfig(str(ws), data=str(mini_data), llm="none", device="cpu", jobs=1, kinds="other"))
    row = res["other"]["served-other:reader"]
    assert row["questions"] == 2 and row["model"] == "FiD reader fid[bm25f]" and "fid[bm25f]" in row["reason"]
    assert all(r["route"] == "reader" and r["model"] == "FiD reader fid[bm25f]" for r in _other_records(ws).values())


def test_non_who_questions_no_reader_can_serve_are_reported_not_judged(dd_ws, tmp_path):
    """No LLM (--llm none) and no trained reader: `ask` refuses every non-Who question with one line, and the row
    says so instead of scoring them."""
    from whoqa.evaluation.unseen import format_other, served_other_results
    q = {"question_id": 7, "document_id": DYING_DETECTIVE, "question": "What is in the box?", "answer1": "a box",
         "answer2": "box"}
    got = served_other_results(tmp_path / "home", dd_ws, [q], llm="none", device="cpu", progress=False)
    assert set(got) == {"served-other"} and "no reader for a question" in got["served-other"]["unavailable"]
    assert format_other(got).startswith("Non-Who questions: 1, not judged: no reader")
