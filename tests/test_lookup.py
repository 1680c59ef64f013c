"""Answer lookup (`whoqa reader lookup`): artificial Who questions as reader examples whose answer is a name
the passages spell, and the pretraining's bookkeeping (resume keys, fold records of runs that start from it)."""
import json
import random

import pytest

from whoqa.core.book import Book, Character, Mention, Token

torch = pytest.importorskip("torch")


def _book(sentences: list[str], names: dict[tuple[int, int], tuple[int, str]], book_id: str = "b") -> Book:
    """A Book from whitespace-tokenised sentences; names: (sentence, word index) -> (character id, PROP|PRON)."""
    tokens, spans, mentions = [], [], []
    for sid, text in enumerate(sentences):
        first = len(tokens)
        for w in text.split():
            i = len(tokens)
            tokens.append(Token(0, sid, i, w, w.lower(), 0, 0, "X", "X", "dep", i))
            if (sid, i - first) in names:
                cid, prop = names[(sid, i - first)]
                mentions.append(Mention(i, i, cid, prop, "PER", w))
        spans.append((first, len(tokens)))
    chars = {1: Character(1, "Tom", ["Tom"], 3, "male"), 2: Character(2, "Mary", ["Mary"], 2, "female")}
    return Book(book_id, tokens, spans, mentions, chars)


FILLER = [f"the weather on day {i} was grey ." for i in range(20)]


def test_the_answer_is_the_name_the_window_spells_and_distractors_do_not_overlap():
    from whoqa.reader.config import LookupConfig
    from whoqa.reader.lookup import lookup_example
    sents = FILLER[:10] + ["Tom walked to the mill .", "Mary waved .", "he sold the old horse ."] + FILLER[10:]
    book = _book(sents, {(10, 0): (1, "PROP"), (11, 0): (2, "PROP"), (12, 0): (1, "PRON")})
    q = {"t": "Who sold the horse?", "a": 1, "s": 12, "k": "agent"}
    cfg = LookupConfig(passages=3)
    e = lookup_example(book, q, cfg, random.Random(0), qid=7)
    assert e.answers == ["Tom"] and e.question == "Who sold the horse?" and e.question_id == 7
    assert len(e.passages) == 3
    answer_window = [p for p in e.passages if "sold the old horse" in p]
    assert len(answer_window) == 1 and "Tom walked" in answer_window[0]  # sentences 10-14 (source is the third)
    others = [p for p in e.passages if p is not answer_window[0]]
    assert all("Tom" not in p and "Mary" not in p and "horse" not in p for p in others)  # outside 10-14


def test_a_question_whose_answer_has_no_proper_name_nearby_is_skipped():
    from whoqa.reader.config import LookupConfig
    from whoqa.reader.lookup import lookup_example
    sents = ["Tom walked to the mill ."] + FILLER[:6] + ["he sold the old horse ."] + FILLER[6:]
    book = _book(sents, {(0, 0): (1, "PROP"), (7, 0): (1, "PRON")})
    q = {"t": "Who sold the horse?", "a": 1, "s": 7, "k": "agent"}
    assert lookup_example(book, q, LookupConfig(), random.Random(0), 0) is None  # "Tom" is 7 sentences back
    q2 = {"t": "Who walked to the mill?", "a": 2, "s": 0, "k": "agent"}  # another character's name is no answer
    assert lookup_example(book, q2, LookupConfig(), random.Random(0), 0) is None


def test_an_answer_cut_off_by_truncation_does_not_fit():
    from transformers import AutoTokenizer
    from whoqa.core.minilm import bundled_minilm
    from whoqa.reader.data import ReaderExample
    from whoqa.reader.lookup import answer_fits
    tok = AutoTokenizer.from_pretrained(bundled_minilm())
    early = ReaderExample(0, "b", "Who sold the horse?", ["Tom"], ["Tom sold the horse. " + "rain fell. " * 60])
    late = ReaderExample(1, "b", "Who sold the horse?", ["Tom"], ["rain fell. " * 60 + "Tom sold the horse."])
    assert answer_fits(tok, early, 64) and not answer_fits(tok, late, 64)


def test_folds_made_before_a_config_field_existed_still_count(tmp_path):
    """A field added to ReaderConfig (as `lookup` was) must not make every earlier run stale."""
    from dataclasses import asdict
    from whoqa.reader.config import ReaderConfig
    from whoqa.reader.train import current_folds
    run = tmp_path / "reader" / "runs" / "fid[bm25f]"
    run.mkdir(parents=True)
    old = {k: v for k, v in asdict(ReaderConfig()).items() if k != "lookup"}
    (run / "config.json").write_text(json.dumps(old))
    (run / "fold0.json").write_text(json.dumps({"config": old, "preread": None, "fold": 0, "predictions": []}))
    (run / "fold1.json").write_text(json.dumps({"config": {**old, "epochs": 9}, "preread": None, "fold": 1,
                                                "predictions": []}))
    folds, done = current_folds(tmp_path, run)
    assert folds == 2 and [d["fold"] for d in done] == [0]


def test_folds_from_a_lookup_saved_before_a_lookup_field_existed_still_count(tmp_path):
    """A field added to LookupConfig (as `spans` was) must not make the runs started from that lookup stale; a lookup
    that really differs still does."""
    from dataclasses import asdict
    from whoqa.reader.config import LookupConfig
    from whoqa.reader.config import PrereadConfig, ReaderConfig
    from whoqa.reader.train import current_folds
    model = tmp_path / "models" / "lookup"
    model.mkdir(parents=True)
    pre, look = asdict(PrereadConfig()), asdict(LookupConfig())
    (model / "whoqa_reader.json").write_text(json.dumps({"config": look, "preread": pre}))
    run = tmp_path / "reader" / "runs" / "fid[bm25f]+lookup"
    run.mkdir(parents=True)
    cfg = asdict(ReaderConfig(lookup=True))
    (run / "config.json").write_text(json.dumps(cfg))
    older = {k: v for k, v in look.items() if k != "spans"}
    for fold, lookup in enumerate([older, {**older, "questions": 99}]):
        (run / f"fold{fold}.json").write_text(json.dumps({"config": cfg, "preread": pre, "lookup": lookup,
                                                         "fold": fold, "predictions": []}))
    folds, done = current_folds(tmp_path, run)
    assert folds == 2 and [d["fold"] for d in done] == [0]


def test_preread_and_lookup_together_is_refused_with_a_reason(tmp_path):
    from whoqa.reader.config import ReaderConfig
    from whoqa.reader.train import start_model_path
    with pytest.raises(ValueError, match="drop --preread"):
        start_model_path(tmp_path, ReaderConfig(preread=True, lookup=True))
    with pytest.raises(FileNotFoundError, match="whoqa reader lookup"):
        start_model_path(tmp_path, ReaderConfig(lookup=True))


def test_renaming_gives_each_character_one_random_name_in_question_passages_and_answer():
    from whoqa.reader.config import LookupConfig
    from whoqa.reader.lookup import lookup_example
    sents = FILLER[:10] + ["Tom walked to Mary .", "Mary waved at Tom .", "he sold the old horse ."] + FILLER[10:]
    book = _book(sents, {(10, 0): (1, "PROP"), (10, 3): (2, "PROP"), (11, 0): (2, "PROP"), (11, 3): (1, "PROP"),
                         (12, 0): (1, "PRON")})
    q = {"t": "Who sold Mary's horse?", "q": ["who", "sold", "CHAR_2", "'s", "horse", "?"], "a": 1, "s": 12}
    names = ["Zora Quill", "Bex", "Odo Flint", "Nim"]
    e = lookup_example(book, q, LookupConfig(passages=2), random.Random(3), 0, names)
    tom, = e.answers
    window = next(p for p in e.passages if "sold the old horse" in p)
    mary = window.split(" walked to ")[1].split(".")[0]
    assert tom in names and mary in names and tom != "Tom" and "Tom" not in window and "Mary" not in window
    assert window.count(tom) == 2 and window.count(mary) == 2  # one name per character throughout
    assert e.question == f"Who sold {mary}'s horse?"


def _artificial_workspace(root, monkeypatch, n_books: int):
    """n_books books of the same 8 sentences, 3 artificial questions each ("Who sold the horse?" -> Tom)."""
    import gzip
    from whoqa.reader import lookup
    sents = ["Tom walked to the mill .", "he sold the old horse ."] + FILLER[:6]
    (root / "artificial").mkdir()
    for b in [f"book{i}" for i in range(n_books)]:
        (root / "books" / b).mkdir(parents=True)
        (root / "books" / b / f"{b}.book").write_text("{}")
        with gzip.open(root / "artificial" / f"{b}.jsonl.gz", "wt") as f:
            for _ in range(3):
                f.write(json.dumps({"t": "Who sold the horse?", "q": ["who", "sold", "the", "horse", "?"], "a": 1,
                                    "s": 1, "k": "agent"}) + "\n")
    monkeypatch.setattr(lookup.Book, "load", lambda folder, book_id: _book(sents, {(0, 0): (1, "PROP")}, book_id))


def _lookup_examples(root, **kw):
    from transformers import AutoTokenizer
    from whoqa.core.minilm import bundled_minilm
    from whoqa.reader.config import LookupConfig
    from whoqa.reader.lookup import lookup_examples
    cfg = LookupConfig(books="all", rename=False, **kw)
    return lookup_examples(root, cfg, AutoTokenizer.from_pretrained(bundled_minilm()), progress=False)


def test_held_out_lookup_questions_come_from_books_never_trained_on(tmp_path, monkeypatch):
    _artificial_workspace(tmp_path, monkeypatch, 12)
    train, held, counts = _lookup_examples(tmp_path, questions=100, heldout=100)
    assert counts["heldout_books"] == 1 and len(held) == 3 and len(train) == 33
    assert not {e.document_id for e in held} & {e.document_id for e in train}
    assert all(e.answers == ["Tom"] for e in train + held)


def test_a_broken_artificial_file_is_skipped_and_counted(tmp_path, monkeypatch):
    _artificial_workspace(tmp_path, monkeypatch, 3)
    (tmp_path / "artificial" / "book1.jsonl.gz").write_bytes(b"not gzip")
    train, held, counts = _lookup_examples(tmp_path, questions=100, heldout=0)
    assert counts["broken_books"] == 1 and len(train) == 6 and not held
    assert {e.document_id for e in train} == {"book0", "book2"}
