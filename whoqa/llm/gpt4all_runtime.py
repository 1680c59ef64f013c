"""llama.cpp through the gpt4all wheel (runtime "llamacpp"): GGUF files of the architectures it knows, on the CPU;
loads in a second and generates 3x faster than transformers, but gives no token probabilities (whoqa.llm.runtimes
has the interface and the choice)."""
from __future__ import annotations

import contextlib
import io
import logging
import time
from pathlib import Path

import torch

from whoqa.core.device import LLAMACPP_DEVICE

log = logging.getLogger(__name__)

LLAMACPP_BATCH = 512  # prompt tokens llama.cpp reads at once (gpt4all's default is 8: `bench llm` shows both)
LLAMACPP_ARCHITECTURES = ("qwen2", "llama", "gemma2", "phi3", "mistral")  # what the gpt4all wheel's llama.cpp loads


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

    def score_names(self, ids: list[int], names: list[list[int]], prefix: int = 0) -> list[float]:
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
