"""Mou et al.'s trained passage ranker: the distant-supervision and ICT lists on a real short book (the Dying
Detective), and the listwise training on a tiny BERT."""
from collections import Counter
import random

import pytest

torch = pytest.importorskip("torch")


def test_book_pmi_favours_a_word_of_this_book():
    from whoqa.retrieval.passage_ranker import BookPMI
    pmi = BookPMI({"a": Counter({"holmes": 5, "said": 20}), "b": Counter({"said": 25, "ship": 5})})
    assert pmi("a", "holmes") > 0 > pmi("a", "ship")
    assert pmi("a", "holmes") > pmi("a", "said")


def test_distant_supervision_positives_hold_the_answer(dd_ws):
    from tests.conftest import DYING_DETECTIVE
    from whoqa.core.workspace import Workspace
    from whoqa.retrieval.openbook import open_book
    from whoqa.retrieval.passage_ranker import PassageRankerConfig, candidate_windows, ds_lists
    ob = open_book(Workspace(dd_ws), DYING_DETECTIVE)
    cfg = PassageRankerConfig()
    wins = candidate_windows(ob, "Who does Holmes send Watson to fetch?", cfg)
    assert 1 < len(wins) <= cfg.candidates and all(w.last - w.first < cfg.width for w in wins)
    lists = ds_lists(ob, "Who does Holmes send Watson to fetch?", ["Culverton Smith", "Mr. Culverton Smith"], cfg,
                     random.Random(0))
    assert lists, "the book names Culverton Smith near the errand: a positive must be found"
    for question, texts in lists:
        assert len(texts) == 1 + cfg.negatives
        assert "Culverton" in texts[0] or "Smith" in texts[0]
        assert not any("Culverton Smith" in t for t in texts[1:])
    assert ds_lists(ob, "Who does Holmes send Watson to fetch?", ["a purple elephant"], cfg, random.Random(0)) == []


def test_ict_pseudo_question_is_cut_from_its_positive(dd_ws):
    from tests.conftest import DYING_DETECTIVE
    from whoqa.core.workspace import Workspace
    from whoqa.retrieval.openbook import open_book
    from whoqa.retrieval.passage_ranker import (BookPMI, PassageRankerConfig, book_counts, content_words, ict_lists)
    ob = open_book(Workspace(dd_ws), DYING_DETECTIVE)
    pmi = BookPMI({ob.id: book_counts(ob.book), "other": Counter({"said": 1000, "the": 5000})})
    cfg = PassageRankerConfig(ict_passages=5)
    lists = ict_lists(ob, pmi, cfg, random.Random(0))
    assert 0 < len(lists) <= 5
    for pq, texts in lists:
        assert len(content_words(pq.split())) >= 3
        assert pq not in texts[0]  # the positive is its passage without it
        assert len(texts) == 1 + cfg.negatives and len(set(texts)) == len(texts)


def test_listwise_training_ranks_the_positive_first(tmp_path):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification
    from whoqa.core.minilm import bundled_minilm
    from whoqa.retrieval.bert_ranker import CrossEncoder
    from whoqa.retrieval.passage_ranker import PassageRankerConfig, train_lists
    tok = AutoTokenizer.from_pretrained(bundled_minilm(""))
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=2, intermediate_size=64,
                                             max_position_embeddings=128, num_labels=1)).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    lists = [("Who killed the dragon?", ["Sigurd killed the dragon with his sword.", "The weather was fine.",
                                         "Bread was baked.", "The river ran north."]),
             ("Who married the queen?", ["The king married the queen.", "Snow fell in May.", "A dog barked.",
                                         "The mill stood idle."])] * 4
    ranker = CrossEncoder(str(tmp_path), device="cpu")
    losses = train_lists(ranker, lists, PassageRankerConfig(epochs=20, lr=3e-3, batch_lists=2), progress=False)
    assert sum(losses[-4:]) / 4 < 0.5 * sum(losses[:4]) / 4
    s = ranker.score("Who killed the dragon?", ["The weather was fine.", "Sigurd killed the dragon with his sword."])
    assert s[1] > s[0]
