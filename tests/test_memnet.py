"""The memory network on tensors built for the purpose: attention, masks, dynamic candidates, and a tiny task."""
import random

import numpy as np
import pytest
import torch

from whoqa.memnet.data import BookArrays, Example, collate
from whoqa.memnet.model import NEG, KVMemNet, MemNetConfig, nll
from whoqa.memnet.train import fit, predict


def model(vocab=50, d=16, hops=3, seed=0):
    torch.manual_seed(seed)
    emb = torch.randn(vocab, d)
    emb[0] = 0
    return KVMemNet(emb, MemNetConfig(hops=hops))


def test_sparsemax_attention_sums_to_one_and_is_sparse():
    m = model()
    q = torch.tensor([[1, 2, 0]])
    keys = torch.tensor([[[1, 2], [3, 4], [5, 6], [7, 0], [8, 9], [1, 0]]])  # (1, 6, 2)
    vals = torch.tensor([[[10], [11], [12], [0], [13], [14]]])
    cands = torch.tensor([[10, 11, 12, 13, 14]])
    _, att = m(q, keys, vals, cands, return_attention=True)  # (1, hops, 6)
    assert torch.allclose(att.sum(-1), torch.ones(1, 3), atol=1e-5)
    assert (att == 0).any()  # sparsemax gives exact zeros


def test_masks_never_give_nan():
    m = model()
    q = torch.tensor([[1, 2], [3, 0]])
    keys = torch.zeros(2, 4, 3, dtype=torch.long)
    keys[0, :2] = torch.tensor([[1, 2, 3], [4, 0, 0]])  # row 1 has no memories at all
    vals = torch.zeros(2, 4, 2, dtype=torch.long)  # no sentence mentions a character: padding value vector
    cands = torch.tensor([[10, 11, 0, 0], [12, 0, 0, 0]])  # books with 2 and 1 characters
    scores, att = m(q, keys, vals, cands, return_attention=True)
    assert torch.isfinite(scores).all() and torch.isfinite(att).all()
    assert (att[1] == 0).all()  # all-masked row: zero attention
    assert (scores[0, 2:] == NEG).all() and (scores[1, 1:] == NEG).all()
    correct = torch.tensor([[False, True, False, False], [True, False, False, False]])
    loss = nll(scores, correct)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)
    assert float(nll(scores[1:], correct[1:])) == pytest.approx(0.0, abs=1e-5)  # one candidate: certain


def test_dynamic_candidates_across_a_batch():
    books = {"a": BookArrays(np.array([[1, 2], [3, 4]]), np.array([[10, 0], [11, 0]]), np.array([10, 11]),
                             np.array([5, 7])),
             "b": BookArrays(np.array([[1, 2]]), np.array([[20, 0]]), np.array([20, 21, 22, 23]),
                             np.array([1, 2, 3, 4]))}
    batch = [Example("a", [1], [0, 1], [7]), Example("b", [2], [0], [3, 4])]
    b = collate(batch, books, memories=3)
    assert b.candidates.shape == (2, 4) and b.cand_chars[0].tolist() == [5, 7, -1, -1]
    assert b.correct.tolist() == [[False, True, False, False], [False, False, True, True]]
    assert b.mentions.shape == (2, 3, 4)  # memory m of question i mentions candidate c
    assert b.mentions[0, :2, :2].tolist() == [[True, False], [False, True]] and not b.mentions[0, 2].any()
    m = model()
    ranked = predict(m, batch, books, memories=3)
    assert sorted(ranked[0]) == [5, 7] and sorted(ranked[1]) == [1, 2, 3, 4]


def test_learns_a_tiny_task():
    """Answer = the character in the key sentence whose verb the question asks about. The question uses a
    different word ("ask_j") than the sentence ("verb_j"), so R must learn the mapping: chance is 1/5."""
    rng = random.Random(0)
    n_verbs, n_chars, d = 10, 8, 24
    verb = lambda j: 1 + j  # noqa: E731
    ask = lambda j: 1 + n_verbs + j  # noqa: E731
    char = lambda c: 1 + 2 * n_verbs + c  # noqa: E731
    vocab = 1 + 2 * n_verbs + n_chars
    books, examples = {}, []
    for b in range(40):
        chars = rng.sample(range(n_chars), 5)
        verbs = rng.sample(range(n_verbs), 5)
        books[f"b{b}"] = BookArrays(np.array([[char(c), verb(v)] for c, v in zip(chars, verbs)]),
                                    np.array([[char(c)] for c in chars]),
                                    np.array([char(c) for c in chars]), np.array(chars))
        for i in range(5):
            examples.append(Example(f"b{b}", [ask(verbs[i])], list(range(5)), [chars[i]]))
    torch.manual_seed(0)
    emb = torch.randn(vocab, d) / d ** 0.5
    emb[0] = 0
    m = KVMemNet(emb, MemNetConfig(hops=1))
    train, test = examples[:150], examples[150:]

    def accuracy():
        return np.mean([r[0] == e.answers[0] for r, e in zip(predict(m, test, books, 5), test)])

    before = accuracy()
    losses = fit(m, train, books, memories=5, epochs=60, lr=0.01, batch_size=16, seed=0)
    assert losses[-1] < losses[0] / 4
    assert accuracy() >= 0.9 > before + 0.3


def test_salience_features_say_what_the_context_and_question_hold():
    from whoqa.memnet.model import SALIENCE, salience_features
    question = torch.tensor([[5, 21, 0]])  # names candidate 21
    candidates = torch.tensor([[20, 21, 22, 0]])
    mentions = torch.tensor([[[False, True, False, False],  # memory 0 (ranked first) mentions 21
                              [True, False, False, False],  # memory 1 mentions 20
                              [True, False, False, False]]])  # memory 2 mentions 20
    book = torch.tensor([[0.0, -1.0, -2.0, 0.0]])
    attention = torch.tensor([[[0.0, 0.5, 0.5]]])  # (1, hops=1, M=3): all on the memories of 20
    f = salience_features(question, candidates, mentions, book, attention)  # (1, 4, F)
    col = {k: f[0, :, i].tolist() for i, k in enumerate(SALIENCE)}
    assert col["book"] == [0.0, -1.0, -2.0, 0.0]
    assert col["context"] == pytest.approx([np.log(3), np.log(2), 0.0, 0.0])
    assert col["first"] == pytest.approx([0.5, 1.0, 0.0, 0.0])
    assert col["attended"] == pytest.approx([1.0, 0.0, 0.0, 0.0])
    assert col["named"] == [0.0, 1.0, 0.0, 0.0]


def test_salience_weights_learn_what_the_vectors_cannot_say():
    """Answer = each book's most mentioned character, whose vector is random: without salience the model is near
    chance on new books; with it, it learns to weigh the book's mention counts."""
    rng = np.random.default_rng(0)
    books, examples = {}, []
    for b in range(30):
        chars = rng.choice(np.arange(10, 50), 5, replace=False)
        counts = rng.permutation([50, 20, 10, 5, 2])
        books[f"b{b}"] = BookArrays(np.array([[1, 2]]), np.array([[0]]), chars, np.arange(5), counts)
        examples += [Example(f"b{b}", [3], [0], [int(np.argmax(counts))]) for _ in range(4)]
    train, test = examples[:80], examples[80:]
    fit_args = dict(epochs=30, lr=0.01, batch_size=16, salience_lr=0.05)
    with_salience, acc = _trained_on(books, train, test, 50, 8, MemNetConfig(hops=1, salience=True), **fit_args)
    assert acc == 1.0 and float(with_salience.salience_w[0]) > 0  # the book-mention weight grew
    assert _trained_on(books, train, test, 50, 8, MemNetConfig(hops=1), **fit_args)[1] < 0.6


def _trained_on(books, train, test, vocab, d, cfg, **fit_args):
    """A memory network on random vectors trained on `train`; (model, P@1 on `test`)."""
    torch.manual_seed(0)
    emb = torch.randn(vocab, d)
    emb[0] = 0
    m = KVMemNet(emb, cfg)
    fit(m, train, books, memories=1, seed=0, **fit_args)
    return m, np.mean([r[0] == e.answers[0] for r, e in zip(predict(m, test, books, 1), test)])


def test_role_gate_tells_the_agent_from_the_patient():
    """Each book: one sentence where a character acts on another. "Who did it?" asks for the agent, "who had it done
    to them?" for the patient. A plain mean of the sentence's characters cannot tell them apart (about half right);
    values weighted by role, as the question asks, can."""
    rng = np.random.default_rng(0)
    books, examples = {}, []
    for b in range(40):
        chars = rng.choice(np.arange(10, 60), 4, replace=False)
        order = rng.permutation(2)  # the agent is not always the first value
        books[f"b{b}"] = BookArrays(np.array([[1, 2]]), np.array([chars[:2][order]]), chars, np.arange(4),
                                    np.ones(4, dtype=int), np.array([[1, 2][k] for k in order])[None])
        examples += [Example(f"b{b}", [3], [0], [0]), Example(f"b{b}", [4], [0], [1])]
    train, test = examples[:60], examples[60:]
    fit_args = dict(epochs=40, lr=0.05, batch_size=8)
    assert _trained_on(books, train, test, 60, 16, MemNetConfig(hops=1, roles=True), **fit_args)[1] >= 0.9
    assert _trained_on(books, train, test, 60, 16, MemNetConfig(hops=1), **fit_args)[1] <= 0.7


def test_a_fine_tuned_model_keeps_only_its_pretrained_rows(tmp_path):
    """Fine-tuned with frozen embeddings after a book was folded into the vectors, the model must still treat that
    book's rows as new (word2vec's, to adapt), not as rows it was trained with."""
    from types import SimpleNamespace
    from whoqa.memnet.adapt import book_rows
    from whoqa.memnet.checkpoint import load_model, save_model
    torch.manual_seed(0)
    vectors = torch.randn(12, 4)
    vectors[0] = 0
    vocab = SimpleNamespace(lineage="v1", matrix=vectors, record=lambda: {"lineage": "v1", "rows": 12})
    m = KVMemNet(vectors, MemNetConfig(hops=1))  # frozen embeddings
    m.trained_rows = 8  # pretrained on rows 0..7; rows 8..11 folded in afterwards
    save_model(m, tmp_path / "m", {"hops": 1}, {}, vocab)
    loaded = load_model(tmp_path / "m", vocab)
    assert loaded.trained_rows == 8 and torch.equal(loaded.embed.weight, vectors)
    book = BookArrays(np.array([[1, 9]]), np.array([[10, 0]]), np.array([10, 3]), np.array([0, 1]))
    assert book_rows(loaded, book).tolist() == [9, 10]
