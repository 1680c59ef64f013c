"""The BERT ranker with a tiny randomly initialised BERT (no weights needed) and the bundled MiniLM tokenizer."""
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification
    from whoqa.retrieval.bert_ranker import RankerConfig, base_model_path
    path = tmp_path_factory.mktemp("tiny")
    tok = AutoTokenizer.from_pretrained(base_model_path(RankerConfig()))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_training_on_a_few_pairs_moves_the_loss(tiny_model, tmp_path):
    from whoqa.retrieval.bert_ranker import CrossEncoder
    pairs = [("Who killed the dragon?", "Sigurd killed the dragon with his sword.", 1.0),
             ("Who killed the dragon?", "The weather was fine in spring.", 0.0),
             ("Who married the queen?", "The king married the queen at midsummer.", 1.0),
             ("Who married the queen?", "Bread was baked every morning.", 0.0)] * 4
    ranker = CrossEncoder(tiny_model, device="cpu")  # the --device path; auto would pick a GPU when there is one
    losses = ranker.train(pairs, epochs=15, lr=3e-3, batch_size=8, seed=0, progress=False)
    assert sum(losses[-4:]) / 4 < 0.7 * sum(losses[:4]) / 4
    s = ranker.score("Who killed the dragon?", ["The weather was fine in spring.", "Sigurd killed the dragon with his sword."])
    assert s[1] > s[0]
    ranker.save(tmp_path / "saved")
    again = CrossEncoder(str(tmp_path / "saved"))
    assert again.score("Who killed the dragon?", ["Sigurd killed the dragon."]) == \
        pytest.approx(ranker.score("Who killed the dragon?", ["Sigurd killed the dragon."]), abs=1e-5)


def test_training_pairs_pick_the_closest_summary_sentence():
    from whoqa.retrieval.bert_ranker import RankerConfig, base_model_path, training_pairs
    summary = ("Emily lives in a castle in the mountains. Her father dies on a journey. "
               "Montoni imprisons Emily in the castle of Udolpho. Valancourt loves Emily and waits for her.")
    qs = [{"question_id": 0, "document_id": "b", "question": "Who imprisons Emily?", "answer1": "Montoni",
           "answer2": "Signor Montoni"}]
    pairs = training_pairs(qs, {"b": summary}, base_model_path(RankerConfig()), negatives=2, seed=0)
    assert pairs[0] == ("Who imprisons Emily?", "Montoni imprisons Emily in the castle of Udolpho.", 1.0)
    assert [p[2] for p in pairs] == [1.0, 0.0, 0.0]
    assert all(p[1] != pairs[0][1] for p in pairs[1:])


def test_book_folds_never_rank_a_book_with_its_own_summary():
    from whoqa.core.folds import book_folds
    folds = book_folds([f"b{i}" for i in range(7)], 3, seed=1)
    assert sorted(b for f in folds for b in f) == [f"b{i}" for i in range(7)]
    assert all(set(a).isdisjoint(b) for i, a in enumerate(folds) for b in folds[i + 1:])


def test_bert_contexts_end_to_end_with_book_folds(tiny_model, mini_data, tmp_path):
    from data_prep.prepare import PrepareConfig, prepare
    from tests.conftest import DYING_DETECTIVE, SHORT_BOOKS, write_qaps
    from whoqa.retrieval.bert_ranker import RankerConfig
    from whoqa.retrieval.contexts import build_contexts, load_contexts
    from whoqa.retrieval.bm25f import context_sentences
    other = SHORT_BOOKS[0]
    write_qaps(mini_data, [(DYING_DETECTIVE, "Who does Holmes send Watson to fetch?", "Culverton Smith",
                            "Mr. Culverton Smith"),
                           (other, "Who are the kittens?", "Tom Kitten and his sisters", "Tom")])
    (mini_data / "narrativeqa" / "summaries.csv").write_text(
        "document_id,set,summary\n"
        f'{DYING_DETECTIVE},test,"Holmes feigns illness. He sends Watson to fetch Culverton Smith. Smith confesses."\n'
        f'{other},test,"Tom Kitten and his sisters are dressed for a party. They lose their clothes. The ducks take them."\n')
    ws = tmp_path / "ws"
    prepare(PrepareConfig(str(mini_data), str(ws), books=[DYING_DETECTIVE, other], artificial=False,
                          embeddings=False), progress=False)
    rep = build_contexts(ws, "bert", progress=False,
                         ranker_cfg=RankerConfig(base=tiny_model, folds=2, pool=30, batch_size=4))
    assert sorted(rep.done) == sorted([DYING_DETECTIVE, other]) and not rep.failed
    assert len(rep.folds) == 2 and all(f["train_pairs"] > 0 for f in rep.folds)
    ctx = load_contexts(ws, "bert", DYING_DETECTIVE)["0"]
    assert 0 < len(context_sentences(ctx, 100)) <= 100
    assert (ws / "models" / "bert_ranker" / "fold0" / "config.json").is_file()
