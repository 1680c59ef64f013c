import os
import shutil
from pathlib import Path

import pytest

import whoqa  # noqa: F401  (pins the CPU math libraries before anything loads them: whoqa.core.numerics)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WHOQA_NO_PROGRESS", "1")
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DYING_DETECTIVE = "09333c7d604bd412e6aef5d3e56b046ed301c5e5"
SHORT_BOOKS = ["2c5f448df18172babaac38806e1fb699a8baf65b", "2dd593d19e201c9cf4edb0703cad0f525c1038a2"]  # Beatrix Potter


def pytest_collection_modifyitems(config, items):
    """Tests that read ../shared (directly or through a fixture) are marked `integration` (`-m "not integration"`
    runs the rest)."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED / "narrativeqa" / "documents.csv").is_file():
        msg = f"shared data not found at {SHARED} (the repository's sibling ../shared)"
        if os.environ.get("CI", "").lower() in ("1", "true"):
            pytest.fail(msg + ": in CI it must be there", pytrace=False)
        pytest.skip(msg)
    return SHARED


@pytest.fixture(scope="session")
def engine():
    from data_prep.engine_spacy import SpacyEngine
    return SpacyEngine()


@pytest.fixture(scope="session")
def parsed(engine, tmp_path_factory):
    """text -> the Book the spaCy engine makes of it (real parses and coreference, written and loaded back)."""
    from whoqa.core.book import Book, write_book_files

    def make(text: str) -> Book:
        d = tmp_path_factory.mktemp("b")
        out = engine.process_text(text)
        write_book_files(d, "t", out.token_rows, out.entity_rows, out.book)
        return Book.load(d, "t")
    return make


@pytest.fixture
def mini_data(tmp_path, shared_data) -> Path:
    """A NarrativeQA-layout folder with two short real books, the Dying Detective, and an empty book."""
    return build_mini_data(tmp_path / "data", shared_data)


@pytest.fixture(scope="session")
def _prepared_dd(tmp_path_factory, shared_data) -> Path:
    from data_prep.prepare import PrepareConfig, prepare
    data = build_mini_data(tmp_path_factory.mktemp("dd") / "data", shared_data)
    ws = data.parent / "ws"
    rep = prepare(PrepareConfig(str(data), str(ws), books=[DYING_DETECTIVE], jobs=1), progress=False)
    assert rep.done == [DYING_DETECTIVE]
    return ws


@pytest.fixture
def dd_ws(_prepared_dd, tmp_path) -> Path:
    """A workspace holding the Dying Detective already prepared (parsed once per session, copied for each test): the
    test's own `prepare` skips the book and rebuilds only the Who set from the test's questions."""
    ws = tmp_path / "ws"
    shutil.copytree(_prepared_dd, ws, symlinks=True)
    return ws


def build_mini_data(root: Path, shared_data: Path) -> Path:
    (root / "books").mkdir(parents=True)
    (root / "narrativeqa").mkdir()
    ids = SHORT_BOOKS + [DYING_DETECTIVE]
    for b in ids:
        shutil.copy(shared_data / "books" / f"{b}.txt", root / "books" / f"{b}.txt")
    lines = (shared_data / "narrativeqa" / "documents.csv").read_text().splitlines()
    keep = [lines[0]] + [l for l in lines[1:] if l.split(",")[0] in ids]
    empty = "e" * 40
    keep.append(f"{empty},test,gutenberg,http://example.org/x.txt,0,,Empty,0,,")
    (root / "books" / f"{empty}.txt").write_text("")
    (root / "narrativeqa" / "documents.csv").write_text("\n".join(keep) + "\n")
    return root


def litbank_folder(shared_data: Path, folder: Path, names: tuple[str, ...], sentences: int | None = None) -> Path:
    """A LitBank coref folder holding only the named documents (their .ann and .txt), each cut to its first
    `sentences` sentences and the mentions inside them when given."""
    for name in names:
        src = shared_data / "litbank" / "coref" / name
        txt = src.with_suffix(".txt").read_text(encoding="utf-8").split("\n")
        ann = src.with_suffix(".ann").read_text(encoding="utf-8").splitlines()
        if sentences is not None:
            txt = txt[:sentences]
            ann = [l for l in ann if not l.startswith("MENTION") or int(l.split("\t")[4]) < sentences]
            kept = {l.split("\t")[1] for l in ann if l.startswith("MENTION")}
            ann = [l for l in ann if not l.startswith("COREF") or l.split("\t")[1] in kept]
        (folder / f"{name}.txt").write_text("\n".join(txt), encoding="utf-8")
        (folder / f"{name}.ann").write_text("\n".join(ann) + "\n", encoding="utf-8")
    return folder


def write_qaps(data_root: Path, rows: list[tuple[str, str, str, str]]) -> None:
    """qaps.csv for a test data folder: (document_id, question, answer1, answer2) rows, set 'test'."""
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["document_id", "set", "question", "answer1", "answer2"])
    for doc, q, a1, a2 in rows:
        w.writerow([doc, "test", q, a1, a2])
    (data_root / "narrativeqa" / "qaps.csv").write_text(buf.getvalue())


@pytest.fixture(scope="session")
def tiny_reader_path(tmp_path_factory):
    """A tiny bert2bert built from a config on the bundled MiniLM's tokenizer (a real model, seconds to train)."""
    import torch
    from transformers import (AutoTokenizer, BertConfig, EncoderDecoderConfig, EncoderDecoderModel)
    from whoqa.core.minilm import bundled_minilm
    path = tmp_path_factory.mktemp("tiny_reader")
    tok = AutoTokenizer.from_pretrained(bundled_minilm())
    torch.manual_seed(0)
    kw = dict(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, max_position_embeddings=256)
    cfg = EncoderDecoderConfig.from_encoder_decoder_configs(
        BertConfig(**kw), BertConfig(**kw, is_decoder=True, add_cross_attention=True))
    EncoderDecoderModel(config=cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_llm_path(tmp_path_factory):
    """A tiny decoder-only Llama built from a config on the bundled MiniLM's tokenizer, with a chat template (a real
    causal LM, random weights)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from whoqa.core.minilm import bundled_minilm
    path = tmp_path_factory.mktemp("tiny_llm")
    tok = AutoTokenizer.from_pretrained(bundled_minilm())
    tok.chat_template = ("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}[assistant] {% endif %}")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=200,
                      bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id, pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)
