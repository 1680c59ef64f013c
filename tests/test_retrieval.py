"""BM25F over Lucene on tiny books parsed for real, and window construction."""

import pytest

from whoqa.core.book import Book, write_book_files
from whoqa.core.query import Query
from whoqa.retrieval.bm25f import BM25FIndex, RetrievalConfig, Window, context_sentences, sentence_fields, windows

TEXT = ("Mr. Holmes met Dr. Watson.\n\nWatson was tired. Watson slept.\n\nHolmes sang a song loudly.\n\n"
        "The station was crowded with people.\n\nWatson left the station at noon.\n\nWatson ate.\n")


@pytest.fixture(scope="module")
def book(engine, tmp_path_factory):
    d = tmp_path_factory.mktemp("book")
    out = engine.process_text(TEXT)
    write_book_files(d, "t", out.token_rows, out.entity_rows, out.book)
    b = Book.load(d, "t")
    BM25FIndex.build(b, d / "idx")
    return b, d / "idx"


def ids(b):
    return {c.name.split()[-1]: c.id for c in b.characters.values()}


def test_fields_take_mentions_out_of_the_words(book):
    b, _ = book
    words, chars = sentence_fields(b, 0)
    assert words == "met ." and sorted(chars.split()) == sorted(f"char_{i}" for i in ids(b).values())


def test_question_names_become_character_ids(book):
    b, _ = book
    words, chars = Query.read("Who did Mr. Holmes meet at the station?").about(b.characters).fields
    assert chars == f"char_{ids(b)['Holmes']}" and "Holmes" not in words and "station" in words


def test_field_weights_move_the_top_sentence(book):
    b, path = book
    holmes = f"char_{ids(b)['Holmes']}"
    sent = {" ".join(b.sentence_words(s)): s for s in range(len(b.sentences))}
    by_chars = BM25FIndex(path, RetrievalConfig(words_weight=1, characters_weight=8)).search("station", holmes, 3)
    by_words = BM25FIndex(path, RetrievalConfig(words_weight=8, characters_weight=1)).search("station", holmes, 3)
    assert by_chars[0][0] in (sent["Holmes sang a song loudly ."], sent["Mr. Holmes met Dr. Watson ."])
    assert by_words[0][0] in (sent["The station was crowded with people ."], sent["Watson left the station at noon ."])


def test_windows_merge_and_clip_at_book_edges():
    # hits at 0 (clipped to 0-2), 3 (overlaps: merged to 0-5), 9 (7-9, clipped at the end of a 10-sentence book)
    w = windows([(0, 5.0), (3, 4.0), (9, 3.0), (20, 1.0)], n_sentences=100, total=10)
    assert w == [Window(0, 5, 5.0), Window(7, 9, 3.0)] and list(w[0].sentences) == [0, 1, 2, 3, 4, 5]
    w = windows([(50, 9.0), (60, 8.0), (70, 7.0)], n_sentences=8, total=100)
    assert [x[:2] for x in w] == [(48, 52), (58, 62)]  # stops once 8 sentences are held
    assert context_sentences(w, 8) == [48, 49, 50, 51, 52, 58, 59, 60]


def test_index_command_writes_contexts(mini_data, dd_ws):
    from data_prep.prepare import PrepareConfig, prepare
    from tests.conftest import DYING_DETECTIVE, write_qaps
    from whoqa.retrieval.contexts import build_contexts, load_contexts
    write_qaps(mini_data, [(DYING_DETECTIVE, "Who does Holmes ask Watson to fetch?", "Culverton Smith",
                            "Mr. Culverton Smith")])
    ws = dd_ws
    prepare(PrepareConfig(str(mini_data), str(ws), books=[DYING_DETECTIVE], artificial=False, embeddings=False),
            progress=False)
    rep = build_contexts(ws, "bm25f", jobs=1, progress=False)
    assert rep.done == [DYING_DETECTIVE]
    ctx = load_contexts(ws, "bm25f", DYING_DETECTIVE)["0"]
    sents = context_sentences(ctx, 100)
    assert len(sents) == 100 and len(set(sents)) == 100
    assert all(ctx[i][2] >= ctx[i + 1][2] for i in range(len(ctx) - 1))
    rep2 = build_contexts(ws, "bm25f", jobs=1, progress=False)
    assert rep2.skipped == 1 and rep2.done == []


def test_search_gives_exactly_anserinis_hits_and_scores(dd_ws):
    """BM25FIndex.search skips SimpleSearcher's loading of every hit (and redoes its tie adjustment): on a real book,
    for questions with many tied hits, the same sentences in the same order with the same scores."""
    from whoqa.core.workspace import Workspace
    from whoqa.retrieval.openbook import open_book
    from whoqa.retrieval.lucene import analyzer, java
    from tests.conftest import DYING_DETECTIVE
    cfg = RetrievalConfig()
    ob = open_book(Workspace(dd_ws), DYING_DETECTIVE, cfg)
    idx = ob.index
    anserini = java("io.anserini.search.SimpleSearcher")(str(Workspace(dd_ws).index / "bm25f" / DYING_DETECTIVE))
    anserini.set_bm25(cfg.k1, cfg.b)
    questions = ["Who is sent to fetch Culverton Smith?", "What is in the box?", "Who tells Watson that Holmes is "
                 "dying?", "Why does Holmes refuse food and water?", "Where does Watson hide?", "the", "said he"]
    tied = 0
    for q in questions:
        words, chars = ob.query(q).fields
        terms = list(dict.fromkeys(analyzer().analyze(words) + chars.lower().split()))
        bq = idx._bq()
        for term in terms:
            cfq = idx._cfq()
            cfq.addField("contents", float(cfg.words_weight))
            cfq.addField("characters", float(cfg.characters_weight))
            cfq.addTerm(idx._bytes(term.encode("utf-8")))
            bq.add(cfq.build(), idx._should)
        want = [(int(h.docid), float(h.score)) for h in anserini.search(bq.build(), cfg.pool)] if terms else []
        got = idx.search(words, chars, cfg.pool)
        assert got == want, q
        tied += sum(1 for (_, a), (_, b) in zip(got, got[1:]) if 0 < a - b < 1e-5)
    assert tied > 20  # the adjustment was exercised, not only distinct scores


def test_a_non_who_query_keeps_what_the_question_asks(book):
    """Question words, auxiliaries and pronouns weigh nothing; named characters go in as their ids."""
    from whoqa.core.words import content_words
    b, _ = book
    assert content_words("Where does he hide the box, and why did they leave?") == "hide box, leave?"
    query = Query.read("Where did Mr. Holmes sing?").about(b.characters)
    words, chars = query.content, query.characters
    assert words == "sing?" and chars == f"char_{ids(b)['Holmes']}"


def test_passage_windows_by_query_and_fusion(book, tmp_path):
    """The question query is the stored contexts' recipe; the content query ranks by the asked words; RRF fuses
    rankings by rank alone."""
    from whoqa.retrieval.bm25f import question_windows
    from whoqa.retrieval.passages import PassageConfig, passage_windows, rrf
    b, path = book
    idx = BM25FIndex(path, RetrievalConfig())
    q = Query.read("Where was the station crowded?").about(b.characters)
    old = passage_windows(b, idx, q, PassageConfig(query="question", fusion="bm25f"))
    assert old == question_windows(idx, q, len(b.sentences), RetrievalConfig())
    sent = {" ".join(b.sentence_words(s)): s for s in range(len(b.sentences))}
    top = passage_windows(b, idx, q, PassageConfig(query="content", fusion="bm25f"))[0]
    assert top[0] <= sent["The station was crowded with people ."] <= top[1]
    with pytest.raises(ValueError, match="DenseIndex"):
        passage_windows(b, idx, q, PassageConfig(fusion="rrf"))
    assert [s for s, _ in rrf([(1, 9.0), (2, 8.0), (3, 7.0)], [(3, 0.9), (1, 0.8)], k=60)] == [1, 3, 2]
    from whoqa.retrieval.passages import DenseIndex
    dense = DenseIndex(b, tmp_path / "v.npy")  # encoded once, then read back
    assert (tmp_path / "v.npy").is_file() and DenseIndex(b, tmp_path / "v.npy").vectors.shape == dense.vectors.shape
    fused = passage_windows(b, idx, q, PassageConfig(fusion="rrf"), dense)
    assert fused and fused[0][0] <= sent["The station was crowded with people ."] <= fused[0][1]
    spanish = Query.read("¿Qué guarda ella en la cajita?").about(b.characters)  # no word is in the book: nothing
    assert passage_windows(b, idx, spanish, PassageConfig(fusion="bm25f")) == []  # by BM25F, the nearest by MiniLM
    assert passage_windows(b, idx, spanish, PassageConfig(fusion="rrf"), dense)


def test_the_pool_fusion_encodes_only_bm25fs_hits_and_ranks_them_as_the_whole_books_vectors_do(book, tmp_path):
    from whoqa.retrieval.passages import DenseIndex, PassageConfig, PoolVectors, passage_windows
    b, path = book
    idx = BM25FIndex(path, RetrievalConfig())
    q = Query.read("Who left the station?").about(b.characters)
    pool = PoolVectors(b)
    got = passage_windows(b, idx, q, PassageConfig(fusion="pool", pool_sentences=2), pool)
    hits = [s for s, _ in idx.search(q.content, q.characters, RetrievalConfig().pool)]
    assert sorted(pool.made) == sorted(hits[:2]) and len(pool.made) < len(b.sentences)  # only the first 2 hits
    dense = DenseIndex(b, tmp_path / "v.npy")
    whole = {s: v for s, v in dense.search(q.text, len(b.sentences))}
    for s, v in pool.rank(q.text, hits[:2]):  # the same cosines as the whole book's vectors give
        assert v == pytest.approx(whole[s], abs=1e-5)
    assert got and any(w[0] <= hits[0] <= w[1] for w in got)
    spanish = Query.read("¿Qué guarda ella en la cajita?").about(b.characters)  # nothing matched: nothing to re-rank
    assert passage_windows(b, idx, spanish, PassageConfig(fusion="pool"), pool) == []


def test_a_passage_window_holds_the_sentences_passage_config_asks_for(book):
    """window=1: each passage is its hit alone, in BM25F's order; the default 5 is the hit with two on each side."""
    from whoqa.retrieval.passages import PassageConfig, passage_windows
    b, path = book
    idx = BM25FIndex(path, RetrievalConfig())
    q = Query.read("Where was the station crowded?").about(b.characters)
    single = passage_windows(b, idx, q, PassageConfig(fusion="bm25f", window=1))
    hits = [s for s, _ in idx.search(q.content, q.characters, RetrievalConfig().pool)]
    assert [(a, z) for a, z, _ in single] == [(s, s) for s in hits]
    wide = passage_windows(b, idx, q, PassageConfig(fusion="bm25f"))
    assert wide[0][:2] == (max(0, hits[0] - 2), min(len(b.sentences) - 1, hits[0] + 2))
    with pytest.raises(ValueError, match="window"):
        PassageConfig(window=0)


def test_best_span_rouge_finds_the_answer_inside_a_passage():
    from whoqa.core.metrics import best_span_rouge_l, rouge_l
    text = "he went up to the old mill by the river at dawn".split()
    assert best_span_rouge_l("the old mill".split(), text) == pytest.approx(1.0)
    assert best_span_rouge_l("a heart attack".split(), text) == 0.0
    half = best_span_rouge_l("old house".split(), text)
    assert half == pytest.approx(rouge_l("old", ["old house"])) and 0 < half < 1
