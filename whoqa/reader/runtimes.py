"""Where a local LLM runs: one interface, `generate` and `score_names`, over prompt token ids, behind which the
runtime is swapped (RUNTIMES, chosen by name or by what the caller needs).

    transformers  any causal LM (a folder, a hub id, or GGUF weights dequantised to torch); CPU or GPU; gives token
                  probabilities, so it scores names
    llamacpp      llama.cpp's quantised CPU kernels through the gpt4all wheel: GGUF files of the architectures it
                  knows; loads in a second and generates 3x faster, but gives no token probabilities
    llama-cpp-python  llama.cpp built from source on the user's machine (`pip install llama-cpp-python`: its own
                  CPU's kernels, AVX-512 where it has them): any architecture today's llama.cpp knows, its logits, so
                  it generates and scores names from the GGUF file (no dequantised copy)

"auto" with `scores` (names need probabilities) takes transformers; otherwise llama.cpp (gpt4all) for a GGUF file it
loads, else transformers. A run takes llama-cpp-python only by name (`--runtime llama-cpp-python`: its scores differ
from transformers' float32 ones in the last digits, so it has its own run name and LLM key); the service scores names
with it where it is installed (`scoring_runtime`) and names it in each answer.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from whoqa.core.device import LLAMACPP_DEVICE, as_device, mixed_precision

log = logging.getLogger(__name__)

LLAMACPP_BATCH = 512  # prompt tokens llama.cpp reads at once (gpt4all's default is 8: `bench llm` shows both)
LLAMACPP_ARCHITECTURES = ("qwen2", "llama", "gemma2", "phi3", "mistral")  # what the gpt4all wheel's llama.cpp loads


class TransformersRuntime:
    name = "transformers"
    scores = True

    def __init__(self, model, device=None, half: bool = False):
        """`model`: a transformers causal LM (loaded by whoqa.reader.llm from a folder, hub id or GGUF file)."""
        if model.config.is_encoder_decoder:
            raise ValueError("an encoder-decoder model is a FiD reader (`whoqa reader train`), not an LLM reader")
        device = as_device(device)
        self.model = model.to(device, dtype=mixed_precision(device)[0] if half else None).eval()
        self.device = next(self.model.parameters()).device
        self.window = getattr(model.config, "max_position_embeddings", None)
        ends = model.generation_config.eos_token_id
        self.ends = ends if isinstance(ends, list) else [ends]

    @torch.no_grad()
    def generate(self, ids: list[int], max_new_tokens: int, stop: list[int], pad: int, tokenizer) -> str:
        """Greedy continuation of the prompt, up to a stop token."""
        x = torch.tensor([ids], device=self.device)  # (1, L)
        out = self.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                                  do_sample=False, eos_token_id=stop or None, pad_token_id=pad)
        return tokenizer.decode(out[0, x.shape[1]:], skip_special_tokens=True)

    @torch.no_grad()
    def score_names(self, ids: list[int], names: list[list[int]]) -> list[float]:
        """Each name's log-likelihood (its tokens' log-probabilities summed) after the prompt: the prompt is run once
        and each name continues a copy of its cache."""
        out = self.model(torch.tensor([ids], device=self.device), use_cache=True)
        first = torch.log_softmax(out.logits[0, -1].float(), -1)  # (V,)
        scores = []
        for toks in names:
            lp = float(first[toks[0]])
            if len(toks) > 1:
                rest = torch.tensor([toks], device=self.device)  # (1, T)
                logits = self.model(rest[:, :-1], past_key_values=copy.deepcopy(out.past_key_values)).logits
                logp = torch.log_softmax(logits[0].float(), -1)  # (T-1, V)
                lp += float(logp.gather(1, rest[0, 1:, None]).sum())
            scores.append(lp)
        return scores

    @torch.no_grad()
    def timings(self, ids: list[int], new_tokens: int, pad: int, tokenizer) -> dict:
        """Seconds to read the prompt and generation tokens/s (`bench llm`)."""
        x = torch.tensor([ids], device=self.device)  # (1, L)
        t = time.perf_counter()
        self.model(x)
        t1 = time.perf_counter()
        self.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens,
                            min_new_tokens=new_tokens, do_sample=False, pad_token_id=pad)
        t2 = time.perf_counter()
        return {"prefill_s": t1 - t, "generate_tok_s": (new_tokens - 1) / max(t2 - t1 - (t1 - t), 1e-9)}


class LlamaCppRuntime:
    name = "llamacpp"
    scores = False

    def __init__(self, llama, context: int):
        self.llama, self.window, self.ends = llama, context, []

    def _text(self, ids: list[int], tokenizer) -> str:
        text = tokenizer.decode(ids, skip_special_tokens=False)
        if tokenizer.bos_token and text.startswith(tokenizer.bos_token):
            text = text[len(tokenizer.bos_token):]  # llama.cpp adds its own
        return text

    def generate(self, ids: list[int], max_new_tokens: int, stop: list[int], pad: int, tokenizer) -> str:
        return llamacpp_generate(self.llama, self._text(ids, tokenizer), max_new_tokens, stop_at_newline=True)

    def score_names(self, ids: list[int], names: list[list[int]]) -> list[float]:
        raise ValueError("scoring names needs the transformers or llama-cpp-python runtime: gpt4all's llama.cpp "
                         "gives no token probabilities")

    def timings(self, ids: list[int], new_tokens: int, pad: int, tokenizer) -> dict:
        out = {}
        for batch in (LLAMACPP_BATCH, 8):  # whoqa's prompt batch, then gpt4all's default
            stamps = []
            t = time.perf_counter()
            llamacpp_generate(self.llama, self._text(ids, tokenizer), new_tokens,
                              on_token=lambda: stamps.append(time.perf_counter()), batch=batch)
            if batch == LLAMACPP_BATCH:
                out["prefill_s"] = stamps[0] - t  # the first token: the prompt read
                out["generate_tok_s"] = (len(stamps) - 1) / max(stamps[-1] - stamps[0], 1e-9)
            else:
                out["prefill_s_batch8"] = stamps[0] - t
        return out


class LlamaCppPythonRuntime:
    """llama.cpp through llama-cpp-python: greedy answers and name scores from the last position's logits. Each call
    reads its prompt afresh (llama.cpp's batched and one-token kernels round differently, so reusing another call's
    cache would make a score depend on what was asked before); within a call the KV cache is kept, so each name
    continues the prompt read once and costs only its own tokens, one at a time."""
    name = "llama-cpp-python"
    scores = True

    def __init__(self, path: Path, context: int):
        try:
            import llama_cpp
        except ImportError as e:
            raise RuntimeError(f"--runtime llama-cpp-python needs llama-cpp-python (pip install llama-cpp-python: it "
                               f"builds llama.cpp for this CPU, a few minutes with a C++ compiler and cmake): {e}") from None
        if not llama_cpp_works(Path(path)):
            raise RuntimeError(f"llama-cpp-python crashes here reading a prompt with {Path(path).name} (a build whose CPU "
                               f"kernels this system does not enable, e.g. AMX in a virtual machine): rebuild it with "
                               f"`bash install.sh`, or use --runtime transformers")
        threads = torch.get_num_threads()
        with contextlib.redirect_stderr(io.StringIO()):
            self.llama = llama_cpp.Llama(str(path), n_ctx=context + 64, n_batch=LLAMACPP_BATCH, n_threads=threads,
                                         n_threads_batch=threads, logits_all=False, verbose=False)
        self._logits_of = llama_cpp.llama_get_logits
        self.window, self.ends = context, [self.llama.token_eos()]
        self.vocab = self.llama.n_vocab()

    def _read(self, ids: list[int], fresh: bool = False) -> np.ndarray:
        """The next token's logits after `ids` (V,): all of `ids` read (fresh), or only what the cache does not hold
        yet."""
        held = [] if fresh else self.llama.input_ids[:self.llama.n_tokens].tolist()
        keep = 0
        while keep < min(len(held), len(ids) - 1) and held[keep] == ids[keep]:
            keep += 1
        self.llama.n_tokens = keep  # eval drops the cache past this point
        self.llama.eval(ids[keep:])
        return np.ctypeslib.as_array(self._logits_of(self.llama.ctx), shape=(self.vocab,)).astype(np.float64)

    def _greedy(self, ids: list[int], new_tokens: int, stop: list[int], on_token=None) -> list[int]:
        logits, out = self._read(ids, fresh=True), []
        for _ in range(new_tokens):
            token = int(np.argmax(logits))
            if on_token is not None:
                on_token()
            if token in stop:
                break
            out.append(token)
            if len(out) < new_tokens:
                logits = self._read(ids + out)
        return out

    def generate(self, ids: list[int], max_new_tokens: int, stop: list[int], pad: int, tokenizer) -> str:
        return tokenizer.decode(self._greedy(ids, max_new_tokens, stop), skip_special_tokens=True)

    def score_names(self, ids: list[int], names: list[list[int]]) -> list[float]:
        """Each name's log-likelihood after the prompt (its tokens' log-probabilities summed)."""
        first = _log_softmax(self._read(ids, fresh=True))  # (V,)
        scores = []
        for toks in names:
            lp = float(first[toks[0]])
            for i in range(1, len(toks)):
                lp += float(_log_softmax(self._read(ids + toks[:i]))[toks[i]])
            scores.append(lp)
        return scores

    def timings(self, ids: list[int], new_tokens: int, pad: int, tokenizer) -> dict:
        stamps = []
        t = time.perf_counter()
        self._greedy(ids, new_tokens, [], on_token=lambda: stamps.append(time.perf_counter()))
        return {"prefill_s": stamps[0] - t, "generate_tok_s": (len(stamps) - 1) / max(stamps[-1] - stamps[0], 1e-9)}


# Run in a child process: a crash there (SIGSEGV) is an answer, not the end of whoqa.
_PROBE = """import sys, llama_cpp
llama = llama_cpp.Llama(sys.argv[1], n_ctx=128, n_batch=64, n_threads=2, verbose=False)
ids = llama.tokenize(b"Who wrote the letter that Holmes read to Watson in the morning?")
llama.eval(ids)
llama.eval([int(llama.scores[llama.n_tokens - 1].argmax())])
"""


def llama_cpp_works(gguf: Path) -> bool:
    """Whether llama-cpp-python's build reads a prompt and a token with this GGUF model without crashing. A build for a
    CPU whose kernels the system does not enable (AMX under some hypervisors: the CPU lists it, the kernel does not
    grant it) dies with SIGSEGV at its first matrix product, which no Python code can catch; so a child process tries
    it once per build and model file and the answer is kept beside the models (~2 s)."""
    import llama_cpp
    from whoqa.core.artifacts import read_cache
    from whoqa.core.runs import digest
    from whoqa.reader.models import cache_dir
    gguf = Path(gguf)
    lib = Path(llama_cpp.__file__).parent / "lib"
    build = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(lib.glob("*.so*"))]
    key = digest([llama_cpp.__version__, build, str(gguf.resolve()), gguf.stat().st_size])
    mark = cache_dir() / "llama-cpp-probe" / f"{key}.json"
    known = read_cache(mark, dict)  # a probe's answer kept (missing or damaged: probed again)
    if known is not None and isinstance(known.get("works"), bool):
        return known["works"]
    try:
        run = subprocess.run([sys.executable, "-c", _PROBE, str(gguf)], capture_output=True, timeout=300)
        works, why = run.returncode == 0, f"exit code {run.returncode}"
    except subprocess.TimeoutExpired:
        works, why = False, "no answer in 300 s"
    if not works:
        log.warning("llama-cpp-python failed reading a prompt with %s (%s): it is not used", gguf.name, why)
    with contextlib.suppress(OSError):
        mark.parent.mkdir(parents=True, exist_ok=True)
        tmp = mark.with_name(f"{mark.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"works": works, "why": why, "llama_cpp": llama_cpp.__version__}))
        tmp.replace(mark)
    return works


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


RUNTIMES = {"transformers": TransformersRuntime, "llamacpp": LlamaCppRuntime,
            "llama-cpp-python": LlamaCppPythonRuntime}


def check_runtime(name: str) -> None:
    if name != "auto" and name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}: use auto, {', '.join(RUNTIMES)}")


def choose_runtime(requested: str, gguf: bool, scores: bool = False) -> str:
    """The one choice of runtime for a model to load (LLMReader): a runtime named is taken; "auto" takes gpt4all's
    llama.cpp for a GGUF file when answering (LLMReader falls back to transformers where it cannot load the file),
    transformers otherwise (names need token probabilities). What serves name scores chooses first with
    `served_runtime`."""
    check_runtime(requested)
    if scores and requested == "llamacpp":
        raise ValueError("scoring names needs the transformers or llama-cpp-python runtime: llama.cpp (gpt4all) "
                         "gives no token probabilities")
    if requested != "auto":
        return requested
    return "llamacpp" if gguf and not scores else "transformers"


def served_runtime(base: str, device=None, scores: bool = False, requested: str = "auto") -> str:
    """The runtime the service asks LLMReader for: for name scores `scoring_runtime`'s (llama-cpp-python where it
    works on the CPU), for answers the one the route's options name (LLMConfig.runtime; "auto" resolved by
    `choose_runtime` when the model loads)."""
    return scoring_runtime(base, device) if scores else requested


def scoring_runtime(base: str, device=None) -> str:
    """The runtime that scores names where whoqa serves (`ask`, the page, `eval --data`): llama-cpp-python for a GGUF
    model on the CPU where it is installed (its scores gave the same book-level cross-validation as transformers'
    float32 ones, question by question, in a third of the memory and without de-quantising: docs/benchmarks.md),
    else transformers (a GPU, a model folder, or no llama-cpp-python)."""
    import importlib.util
    from whoqa.core.device import on_cpu
    from whoqa.reader.models import locate
    if not (on_cpu(device) and locate(base)[1]) or importlib.util.find_spec("llama_cpp") is None:
        return "transformers"
    try:
        import llama_cpp  # noqa: F401  (installed and loadable: a broken install falls back, and says so)
    except Exception as e:  # a missing dependency, or its shared library failed to load
        log.warning("llama-cpp-python is installed but does not load (%s): transformers scores the names", e)
        return "transformers"
    folder, gguf = locate(base)
    return "llama-cpp-python" if llama_cpp_works(Path(folder) / gguf) else "transformers"


def llamacpp_generate(llama, text: str, max_tokens: int, stop_at_newline: bool = False, on_token=None,
                      batch: int | None = None) -> str:
    """Greedy continuation of a prompt already rendered with the model's chat template, through gpt4all's lower-level
    call: GPT4All.generate outside a chat session tokenizes <|im_start|> and the like as plain text (`special` off),
    so the model would never see its chat format (and the prompt grows past the context)."""
    pieces: list[str] = []

    def keep(_token, piece: str) -> bool:
        pieces.append(piece)
        if on_token is not None:
            on_token()
        return not (stop_at_newline and "\n" in piece)
    llama.model.prompt_model(text, "%1", keep, n_predict=max_tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0,
                             repeat_penalty=1.0, n_batch=batch or LLAMACPP_BATCH, reset_context=True, special=True)
    return "".join(pieces)


def llamacpp(path: Path, context: int, strict: bool, architecture: str | None):
    """A gpt4all (llama.cpp) model of a GGUF file on the CPU, or None (strict: an error) when the wheel is missing
    or does not know the architecture."""
    try:
        if architecture not in LLAMACPP_ARCHITECTURES:
            raise ValueError(f"llama.cpp (gpt4all) does not load {architecture} models; use --runtime transformers")
        from gpt4all import GPT4All
        with contextlib.redirect_stderr(io.StringIO()):  # it tries (and reports failing) its CUDA builds first
            return GPT4All(path.name, model_path=str(path.parent), allow_download=False, device=LLAMACPP_DEVICE,
                           n_threads=torch.get_num_threads(), n_ctx=context + 64, verbose=False)
    except ImportError as e:
        if strict:
            raise RuntimeError(f"--runtime llamacpp needs the gpt4all wheel (pip install gpt4all): {e}") from None
    except Exception as e:  # an architecture or file llama.cpp refuses: transformers reads it instead
        if strict:
            raise RuntimeError(f"llama.cpp (gpt4all) cannot load {path.name}: {e}") from None
        log.info("llama.cpp cannot load %s (%s): transformers reads it", path.name, e)
    return None
