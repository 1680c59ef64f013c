"""The reader chooses among the people its passages mention (whoqa.ranker.reader_choice): who the candidates are, how
each is scored by a real LLM after one reading, how the choice enters one fitted ranking, and how a shipped fit is
read back."""
import json

import numpy as np
import pytest

from whoqa.core.aliases import AliasIndex
from whoqa.core.query import Query
from whoqa.ranker.cast import cast_of
from whoqa.retrieval.bm25f import Window
from whoqa.ranker.reader_choice import (CHOICE, CLIP, Choice, ChoiceRanker, candidate_names, choice_features,
                                        load_choice_fit, passage_people, ranking_features)

STORY = ("Roy Glenister sailed north with Joe Dextry. On the ship Glenister met Helen Chester, and he loved her. "
         "Judge Stillman hated Glenister. Judge Stillman said so. Mr. Glenister fought McNamara in the street. "
         "Joe Dextry laughed at McNamara. Glenister thanked Joe Dextry. Judge Stillman ran.")


@pytest.fixture(scope="module")
def book(parsed):
    return parsed(STORY)


def _query(book, text):
    return Query.read(text).about(AliasIndex(book.characters))


def _rep(book, word):
    cast = cast_of(book)
    return next(r for r, n in cast.names.items() if word in n)


def test_candidates_are_the_passages_people_in_first_mention_order_without_the_questions_own(book):
    everything = list(range(len(book.sentences)))
    people, mentions = passage_people(book, everything, _query(book, "Who does Glenister love?"))
    assert _rep(book, "Glenister") not in people  # the question's own person is not its answer
    assert {_rep(book, "Helen"), _rep(book, "Dextry"), _rep(book, "Stillman")} <= set(people)
    assert people.index(_rep(book, "Dextry")) < people.index(_rep(book, "Helen"))  # first mentioned, first listed
    assert len(mentions) == len(people) and min(mentions) >= 1
    helen = mentions[people.index(_rep(book, "Helen"))]
    assert helen >= 2  # "Helen Chester" and the "her" resolved to her
    reflexive, _ = passage_people(book, everything, _query(book, "Who thanks himself?"))
    assert _rep(book, "Glenister") in reflexive
    first, _ = passage_people(book, [0], _query(book, "Who sailed north?"))
    assert set(first) == {_rep(book, "Glenister"), _rep(book, "Dextry")}  # only the sentences read


def test_a_candidate_is_scored_by_its_cast_name_and_other_proper_names(book):
    names = candidate_names(book, _rep(book, "Glenister"))
    assert names[0] == cast_of(book).names[_rep(book, "Glenister")]
    assert len(names) == len({n.lower() for n in names}) <= 3 and all(n[0].isupper() for n in names)


def test_reading_features_set_apart_the_passages_people_and_the_readers_first_choice():
    ids = [1, 2, 3, 4]
    choice = Choice([3, 2], [["C"], ["B"]], [[-1.0], [-30.0]], [[1], [1]], [0, 1], [2, 1])
    x = choice_features(ids, choice, written=2)  # (4, 5)
    assert x.shape == (4, len(CHOICE))
    assert x[:, 0].tolist() == [0, 1, 1, 0]  # in the passages
    assert x[2, 1] == pytest.approx(0.0, abs=1e-9) and x[1, 1] == CLIP  # log-softmaxed, clipped
    assert x[:, 2].tolist() == [0, 0, 1, 0]  # the first choice
    assert x[2, 3] == pytest.approx(np.log1p(2))
    assert x[:, 4].tolist() == [0, 1, 0, 0]  # the written answer's person
    empty = choice_features(ids, Choice([], [], [], []))
    assert not empty.any()


def test_the_passages_read_one_by_one_vote_by_their_rank():
    """Each passage's first choice is a vote weighed 1 / (1 + its rank); a person's vote_choice is its best
    log-softmaxed choice over the passages that name it (0 where none does); the joint columns are untouched."""
    ids = [1, 2, 3]
    joint = Choice([3, 2], [["C"], ["B"]], [[-1.0], [-30.0]], [[1], [1]], [0, 1], [2, 1])
    votes = [Choice([2, 3], [["B"], ["C"]], [[-0.1], [-5.0]], [[1], [1]]),  # first passage: 2
             Choice([3], [["C"]], [[-2.0]], [[1]]),  # second: 3, the only one it names (log-softmax 0)
             Choice([], [], [], [])]  # third: nobody
    x = choice_features(ids, joint, votes=votes)
    v, c = CHOICE.index("votes"), CHOICE.index("vote_choice")
    assert x[:, v].tolist() == pytest.approx([0.0, 1.0, 0.5])
    assert x[0, c] == 0.0 and x[2, c] == pytest.approx(0.0, abs=1e-9)  # 3's best: the second passage's certain 0
    assert x[1, c] == pytest.approx(-np.log1p(np.exp(-4.9)), abs=1e-6)
    assert (x[:, :5] == choice_features(ids, joint)[:, :5]).all()


def test_one_fitted_ranking_orders_the_cast_and_its_probabilities_sum_to_one():
    fit = ChoiceRanker([1.0, 0.0, 2.0], ["book_share", "in_passages", "choice_first"])
    x_counts = np.log(np.array([[0.5], [0.3], [0.2]]))  # (3, 1): book shares
    reading = np.zeros((3, len(CHOICE)))
    reading[2, CHOICE.index("choice_first")] = 1.0
    order, p = fit.probabilities(ranking_features(fit, x_counts, ["book_share"], reading))
    assert order[0] == 2  # the reader's choice outweighs the counts at these weights
    assert p.sum() == pytest.approx(1.0) and list(p) == sorted(p, reverse=True)


def test_a_shipped_fit_is_read_back_and_a_damaged_one_is_one_line(tmp_path):
    assert load_choice_fit(tmp_path / "none.json") is None
    good = tmp_path / "fit.json"
    good.write_text(json.dumps(ChoiceRanker([0.5, 1.0], ["book_share", "choice"], 10, "here", 0.03,
                                            "qwen2.5-coder-1.5b", "pool").__dict__))
    fit = load_choice_fit(good)
    assert fit.reader == "qwen2.5-coder-1.5b" and fit.features == ["book_share", "choice"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"weights": [1.0], "features": ["shoe_size"]}))
    with pytest.raises(ValueError, match="bad.json weighs features whoqa does not build"):
        load_choice_fit(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json is damaged .*whoqa fit-choice"):
        load_choice_fit(bad)


def test_a_real_llm_scores_every_candidate_after_one_reading(tmp_path, tiny_llm_path):
    """The tiny Llama (real weights from a config) reads the passages once and scores every candidate's names: one
    score per name, the same scores for the same prompt whatever the candidates' order."""
    from whoqa.llm.reader import LLMReader
    from whoqa.ranker.reader_choice import reader_choice
    from whoqa.service import Service, ServiceConfig
    (tmp_path / "s.txt").write_text(STORY * 3)
    svc = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm=tiny_llm_path))
    ob = svc.open(svc.intake(text=tmp_path / "s.txt"))
    query = ob.read("Who does Glenister love on the ship?")
    wins = svc.passages(ob, query)
    reader = LLMReader(tiny_llm_path, device="cpu", runtime="transformers", scores=True, prompt_tokens=180)
    got = reader_choice(reader, ob, query, wins)
    assert got.candidates and len(got.scores) == len(got.candidates) == len(got.names)
    assert all(len(s) == len(n) for s, n in zip(got.scores, got.names))
    assert all(np.isfinite(v) and v < 0 for s in got.scores for v in s)
    cast = cast_of(ob.book)
    assert cast.of(next(iter(query.named))) not in got.candidates
    again = reader_choice(reader, ob, query, wins)
    assert again.scores == got.scores  # greedy likelihoods: no randomness


def _rows(tmp_path, books=12, per_book=4, seed=0):
    """Rows as `choice-rows` writes them, for books where the reader's first choice is the answer three times in
    four and the counts' favourite once in four."""
    import gzip
    rng = np.random.default_rng(seed)
    nqa, readers = [], []
    for b in range(books):
        for q in range(per_book):
            ids = list(range(6))
            x = np.zeros((6, 5))
            x[:, 0] = np.log(np.array([0.4, 0.2, 0.15, 0.1, 0.1, 0.05]))  # book shares: 0 is the most mentioned
            answer = 0 if q == 0 else int(rng.integers(1, 6))
            cands = sorted({answer, 0, int(rng.integers(1, 6))})
            scores = [[-1.0] if c == answer else [-4.0] for c in cands]
            row = {"key": f"{b}-{q}", "book": f"book{b}", "question": "Who?", "ids": ids, "x": x.tolist(),
                   "features": ["book_share", "context_mentions", "named", "book_role", "book_role_with_args"],
                   "names_cast": [f"Person{i}" for i in ids], "written": [],
                   "choice": Choice(cands, [[f"Person{c}"] for c in cands], scores, [[2]] * len(cands),
                                    [0], [1] * len(cands)).to_json(), "right": [answer]}
            nqa.append(row)
    for name in ("fit", "check"):
        for q in range(3):
            r = dict(nqa[q])
            r.pop("right")
            r["key"], r["names"] = f"{name}book:{q}", [f"Person{nqa[q]['right'][0]}"]
            readers.append(r)
    paths = []
    for rows, name in ((nqa, "nqa"), (readers, "readers")):
        paths.append(tmp_path / f"{name}.jsonl.gz")
        with gzip.open(paths[-1], "wt") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def test_the_fitted_ranking_learns_to_trust_a_reader_that_chose_right_and_ships_a_fit_serving_reads(tmp_path,
                                                                                                   monkeypatch):
    from whoqa.evaluation import choice_fit
    monkeypatch.setattr(choice_fit, "load_split", lambda: {"fitbook": "fit", "checkbook": "check"})
    nqa, readers = _rows(tmp_path)
    ship = tmp_path / "shipped.json"
    table = choice_fit.fit_choice(nqa, readers, "counts+choice", ship=ship, report=tmp_path / "report.json")
    counts, chose = np.mean(table["counts"]["cv"]["p@1"]), np.mean(table["counts+choice"]["cv"]["p@1"])
    assert counts == pytest.approx(25.0) and chose >= 70.0  # the counts' favourite is right one time in four
    assert table["counts+choice"]["check"]["n"] == 3 and table["counts+choice"]["fit_half"]["n"] == 3
    assert table["choice first"]["cv"]["ece"] == [None, None, None]  # a rule states no probability
    fit = load_choice_fit(ship)
    assert fit.features[-4:] == list(CHOICE[:4]) and fit.reader == "qwen2.5-coder-1.5b"
    assert fit.provenance["check_half"]["n"] == 3 and "fit-choice" in fit.provenance["command"]
    with pytest.raises(ValueError, match="unknown arm"):
        choice_fit.fit_choice(nqa, readers, "everything")


def test_ask_serves_the_choice_ranking_with_the_sentence_it_came_from_and_plain_reasons(tmp_path, tiny_llm_path,
                                                                                      monkeypatch):
    """With a choice ranking shipped for the reader in use, a Who answer is the reader's choice among the passages'
    people weighed with the counts: one reader loaded (no name scorer beside it), the reasons say what it chose,
    the evidence mentions the answer, and a reader the fit was not made with gets the feature ranker, said once."""
    from whoqa.llm.config import model_name
    from whoqa.ranker import reader_choice
    from whoqa.service import Service, ServiceConfig
    fit = ChoiceRanker([1.0, 0.5, -5.0, 0.0, 3.0, 0.0], ["book_share", "context_mentions", "named", "in_passages",
                                                         "choice", "choice_first"], 10, "a test", 0.05,
                       model_name(tiny_llm_path), "bm25f")
    monkeypatch.setattr(reader_choice, "load_choice_fit", lambda path=None: fit)
    (tmp_path / "s.txt").write_text(STORY * 3)
    svc = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm=tiny_llm_path))
    book = svc.intake(text=tmp_path / "s.txt")
    ans = svc.answer(book, "Who does Glenister love on the ship?")
    assert ans.route == "features" and "choosing among" in ans.model
    assert ans.why[0].startswith("asked to choose among the") and "chose" in ans.why[0]
    assert sum(c.probability for c in ans.characters) <= 1.0 + 1e-9 and ans.calibration["stage"] == "choice"
    top = ans.characters[0]
    assert ans.evidence and ans.evidence[0].marks  # the answer marked in the sentence shown first
    assert not top.name.endswith("Glenister")  # the question's own person: no candidate, and "named" weighs against
    assert all(not scores for (_, scores, *_) in svc.models._llms)  # only the reader that writes was loaded
    fit.reader = "another-reader"
    other = Service(tmp_path / "ws", ServiceConfig(device="cpu", llm=tiny_llm_path))
    assert "choosing among" not in other.answer(book, "Who does Glenister love on the ship?").model


def test_the_counts_favourites_are_scored_after_the_same_reading_and_set_apart(book):
    """`also`: people scored though the passages read do not mention them (the counts' first k), after the
    passages' own people, never the question's own person; reading's features say they were not in the passages."""
    from types import SimpleNamespace
    from whoqa.ranker.reader_choice import reader_choice

    class Reading:  # what reader_choice asks of a reader: its prompt's passages kept, and each name's score
        def prompt(self, question, passages, *a, **k):
            return [], passages[:1]

        def name_scores(self, question, passages, names, *a, **k):
            return [-float(len(n)) for n in names]

        def count_tokens(self, text):
            return len(text.split())

    aliases = AliasIndex(book.characters)
    ob = SimpleNamespace(book=book, id=book.id, windows=lambda q: [Window(0, 0, 1.0)])
    query = Query.read("Who sailed north?").about(aliases)
    first = Window(0, 0, 1.0)  # the first sentence: Glenister and Dextry
    stillman, glenister = _rep(book, "Stillman"), _rep(book, "Glenister")
    import whoqa.llm.reader as llm_reader
    got = reader_choice(Reading(), ob, query, [first], also=[stillman, _rep(book, "Dextry")],
                        cfg=llm_reader.LLMConfig(shots=0))
    assert got.candidates[-1] == stillman and got.extra == [stillman]  # Dextry is in the passage already
    x = choice_features(got.candidates, got)
    assert x[-1, 0] == 0 and x[0, 0] == 1  # not in the passages / in them
    named = reader_choice(Reading(), ob, Query.read("Who did Glenister sail with?").about(aliases), [first],
                          also=[glenister], cfg=llm_reader.LLMConfig(shots=0))
    assert glenister not in named.candidates
