"""The anonymous-slot memory network on real spaCy parses of texts written here: it learns who did what from one
book's artificial questions and answers them about another book with other names, and what it answers does not
depend on which character is which id."""
import random

import numpy as np
import pytest
import torch

from data_prep.artificial import generate
from whoqa.core.metrics import ranking_metrics
from whoqa.memnet import slot_train as st
from whoqa.memnet.slots import SlotConfig, SlotMemNet, WordVocab, collate, slot_book

VERBS = ["painted the portrait", "kissed", "warned", "visited", "hated", "thanked", "followed", "admired",
         "robbed", "married", "helped", "blamed"]


def story(names: list[str], seed: int, n: int = 60) -> str:
    """Sentences "A <verb> B." with agents and patients drawn evenly, so that no name is the answer by frequency."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        a, b = rng.sample(names, 2)
        v = rng.choice(VERBS)
        lines.append(f"{a} {v}." if v == VERBS[0] else f"{a} {v} {b}.")
    return "\n\n".join(" ".join(lines[i:i + 3]) for i in range(0, n, 3))


@pytest.fixture(scope="module")
def two_books(parsed):
    a = parsed(story(["Anna Pell", "Bertram Quist", "Cecily Rowe", "Daniel Sark"], 1))
    b = parsed(story(["Edith Vane", "Felix Wold", "Gemma Yates", "Hector Zorn"], 2))
    words = sorted({t.word.lower() for book in (a, b) for t in book.tokens} | {"who", "did", "?"})
    g = torch.Generator().manual_seed(0)
    vocab = WordVocab(words, torch.cat([torch.zeros(1, 16), torch.randn(len(words), 16, generator=g)]))
    return {"A": (a, slot_book(a, vocab).with_word_sums(vocab.matrix)),
            "B": (b, slot_book(b, vocab).with_word_sums(vocab.matrix))}, vocab


def examples(name, book, arrays, vocab):
    rows, _ = generate(book)
    return [st.artificial_example(name, q, arrays, vocab) for q in rows]


def test_answers_about_a_book_it_never_saw(two_books):
    books, vocab = two_books
    train = examples("A", *books["A"], vocab)
    test = examples("B", *books["B"], vocab)
    assert len(train) > 50 and len(test) > 50
    torch.manual_seed(0)
    arrays = {k: v[1] for k, v in books.items()}
    model = SlotMemNet(vocab.matrix, SlotConfig(hops=2, slots=8))
    losses = st.fit(model, train, arrays, memories=4, epochs=25, lr=1e-2, batch_size=16, seed=0)
    assert losses[-1] < losses[0]
    ranked = [sorted(lp, key=lambda c: -lp[c]) for lp in st.predict(model, test, arrays, memories=4)]
    got = ranking_metrics(ranked, [e.answers for e in test])
    counts = books["B"][1].counts
    frequency = [list(books["B"][1].char_ids[np.argsort(-counts, kind="stable")])] * len(test)
    base = ranking_metrics(frequency, [e.answers for e in test])
    assert got["p@1"] > base["p@1"] + 25, (got, base)  # reads the new book: far above its most frequent name


def test_what_it_answers_does_not_depend_on_character_ids(two_books):
    books, vocab = two_books
    book, arrays = books["B"]
    qs = examples("B", book, arrays, vocab)[:20]
    model = SlotMemNet(vocab.matrix, SlotConfig(hops=2, slots=8))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    before = st.predict(model, qs, {"B": arrays}, memories=4)
    # the same book with its characters under other ids, listed in another order
    order = np.random.default_rng(3).permutation(len(arrays.char_ids))  # new local j holds old local order[j]
    new = np.argsort(order)  # old local i -> new local new[i]
    renamed = {int(c): 1000 + 7 * int(new[i]) for i, c in enumerate(arrays.char_ids)}
    moved = st.SlotBook(arrays.words, arrays.length, np.where(arrays.chars > 0, new[arrays.chars - 1] + 1, 0),
                        arrays.mult, arrays.roles, 1000 + 7 * np.arange(len(order)), arrays.counts[order],
                        arrays.gender[order], arrays.word_sums)
    qs2 = [st.SlotExample("B", e.words, [int(new[i]) for i in e.named], e.context, [renamed[a] for a in e.answers])
           for e in qs]
    after = st.predict(model, qs2, {"B": moved}, memories=4)
    for x, y in zip(before, after):
        assert {renamed[c]: round(v, 5) for c, v in x.items()} == {c: round(v, 5) for c, v in y.items()}


def test_slots_are_drawn_anew_and_other_characters_share_one(two_books):
    books, vocab = two_books
    arrays = books["A"][1]
    e = examples("A", *books["A"], vocab)[10]
    rng = np.random.default_rng(0)
    draws = {tuple(collate([e], {"A": arrays}, 4, 8, rng).cand_slot[0].tolist()) for _ in range(20)}
    assert len(draws) > 1  # a character is not its slot
    b = collate([e], {"A": arrays}, 1, 8)
    mentioned = {int(c) - 1 for c in arrays.chars[e.context[:1]].ravel() if c > 0} | set(e.named)
    for i, s in enumerate(b.cand_slot[0].tolist()):
        assert (s == 9) == (i not in mentioned)  # OTHER = slots + 1 for every character the question never meets


def test_whoqa_slots_trains_the_network_ask_scores_any_book_with(mini_data, dd_ws, parsed):
    """`whoqa slots pretrain` and `train --final` on a prepared workspace; the ensemble scores a book it never saw
    (a text written here) through the SlotScorer the service uses."""
    from typer.testing import CliRunner

    from cli import app
    from data_prep.prepare import PrepareConfig, prepare
    from tests.conftest import DYING_DETECTIVE, write_qaps
    from whoqa.core.aliases import AliasIndex
    from whoqa.core.query import Query
    from whoqa.memnet.slot_ask import SlotScorer
    from whoqa.retrieval.contexts import build_contexts
    write_qaps(mini_data, [(DYING_DETECTIVE, "Who does Holmes send Watson to fetch?", "Culverton Smith",
                            "Mr. Culverton Smith")])
    prepare(PrepareConfig(str(mini_data), str(dd_ws), books=[DYING_DETECTIVE]), progress=False)
    build_contexts(dd_ws, "bm25f", progress=False)
    run = CliRunner().invoke
    got = run(app, ["slots", "pretrain", "--workspace", str(dd_ws), "--no-exclude-who", "--fraction", "0.5"])
    assert got.exit_code == 0, got.output
    assert "pretrained on" in got.output and (dd_ws / "models" / "slots-pretrain" / "model.pt").is_file()
    got = run(app, ["slots", "train", "--workspace", str(dd_ws), "--final", "--epochs", "2", "--trials", "2"])
    assert got.exit_code == 0, got.output
    scorer = SlotScorer(dd_ws / "models" / "slots")
    assert len(scorer.models) == 2
    book = parsed(story(["Edith Vane", "Felix Wold", "Gemma Yates", "Hector Zorn"], 2))
    question = "Who did Edith Vane thank?"
    query = Query.read(question).about(AliasIndex(book.characters))
    scores = scorer.scores(book, query, list(range(len(book.sentences))))
    assert set(scores) == set(book.characters)
    alone = [st.predict(m, [st.SlotExample(book.id, *st.split_question(
        ["who", "did", f"CHAR_{c}", "thank", "?"], scorer._arrays(book), scorer.vocab), list(range(len(
            book.sentences))), [])], {book.id: scorer._arrays(book)}, 100)[0] for m in scorer.models
        for c in [next(i for i, ch in book.characters.items() if ch.name.startswith("Edith"))]]
    for c, v in scores.items():  # the members' mean log-probability
        assert abs(v - (alone[0][c] + alone[1][c]) / 2) < 1e-5
    assert (dd_ws / "models" / "slots" / "model.pt.sha256").is_file()  # `whoqa check` verifies it
    # the served feature ranker with the network feature reads these scores (and refuses to rank without them)
    from whoqa.ranker.model import FeatureRanker
    from whoqa.ranker.serve import rank
    only_network = FeatureRanker([0.0, 0.0, 0.0, 1.0], [], features={"stage1": ["book_share", "context_mentions",
                                                                               "named", "network"], "stage2": []})
    from whoqa.retrieval.bm25f import Window
    wins = [Window(0, len(book.sentences) - 1, 1.0)]  # the whole book, as scored above
    from whoqa.retrieval.openbook import OpenBook
    ob = OpenBook(book, AliasIndex(book.characters), None)
    got = rank(only_network, ob, query, wins, network=scorer)
    assert got.ids[0] == max(scores, key=scores.get)  # the network's first choice
    with pytest.raises(FileNotFoundError, match="whoqa slots train --final"):
        rank(only_network, ob, query, wins)
