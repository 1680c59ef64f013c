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
with it where it is installed (`scoring_runtime`) and names it in each answer. The runtime is chosen in one place,
`choose_runtime` (with `served_runtime` for the service); llama.cpp's two bindings live in gpt4all_runtime.py and
llama_cpp_python.py.
"""
from __future__ import annotations

import copy
import time
import logging
from pathlib import Path

import torch

from whoqa.core.device import as_device, mixed_precision
from whoqa.core.registry import Registry
from whoqa.llm.gpt4all_runtime import (LLAMACPP_ARCHITECTURES, LLAMACPP_BATCH, LlamaCppRuntime,  # noqa: F401
                                          llamacpp, llamacpp_generate)
from whoqa.llm.llama_cpp_python import LlamaCppPythonRuntime, llama_cpp_works

log = logging.getLogger(__name__)


class TransformersRuntime:
    name = "transformers"
    scores = True

    def __init__(self, model, device=None, half: bool = False):
        """`model`: a transformers causal LM (loaded by whoqa.llm.reader from a folder, hub id or GGUF file)."""
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
    def score_names(self, ids: list[int], names: list[list[int]], prefix: int = 0) -> list[float]:
        """Each name's log-likelihood (its tokens' log-probabilities summed) after the prompt: the prompt is run once
        and each name continues a copy of its cache (`prefix`, the start prompts share, is read again every call)."""
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


RUNTIMES = Registry("runtime", {"transformers": TransformersRuntime, "llamacpp": LlamaCppRuntime,
                               "llama-cpp-python": LlamaCppPythonRuntime}, also=("auto",))


def check_runtime(name: str) -> None:
    RUNTIMES.check(name)


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
    from whoqa.llm.models import locate
    if not (on_cpu(device) and locate(base)[1]) or importlib.util.find_spec("llama_cpp") is None:
        return "transformers"
    try:
        import llama_cpp  # noqa: F401  (installed and loadable: a broken install falls back, and says so)
    except Exception as e:  # a missing dependency, or its shared library failed to load
        log.warning("llama-cpp-python is installed but does not load (%s): transformers scores the names", e)
        return "transformers"
    folder, gguf = locate(base)
    return "llama-cpp-python" if llama_cpp_works(Path(folder) / gguf) else "transformers"
