"""The feature ranker's measurement config: what `whoqa rerank` judges (the LLM, its prompt, the candidates, the
folds), each default declared once (the CLI reads its option defaults from it), and the run-name suffix of a prompt
that is not the served one."""
from __future__ import annotations

from dataclasses import dataclass

from whoqa.core.seed import SEED
from whoqa.ranker.features import BASE
from whoqa.llm.config import LLMConfig

CANDIDATES = ("network", "book-frequency", "features")


@dataclass
class RerankConfig:
    """A local LLM re-ranking the memory network's Who candidates (whoqa.evaluation.rerank), or judging the feature
    ranker (whoqa.ranker.train) on book folds."""
    base: str = LLMConfig.base  # the LLM; it runs on transformers, which gives token probabilities
    top_k: int = 5  # the candidates the LLM scores
    candidates: str = "network"  # whose top k: the memory network's (its run's calibrated ensemble) or book-frequency's
    passages: int = LLMConfig.top_k  # BM25F passages offered (as many as fit the prompt budget, in book order)
    prompt_tokens: int = LLMConfig.prompt_tokens
    shots: int = LLMConfig.shots  # Who questions of other books with their answers, before the question
    shot_policy: str = "question"  # how they are drawn (whoqa.llm.prompt.SHOT_POLICIES): per question, or
    #                                "fixed": the same for every question of a book (llama.cpp reads them once)
    folds: int = 10  # the feature ranker without a network run: book folds of its own (the paper's 10)
    fold_seed: int = SEED  # which books go together in those folds (other seeds: the figures' spread over folds)
    rendering: str = "raw"  # how the passages show the engine's coreference (whoqa.llm.render.RENDERINGS)
    marks: str = "all"  # whose mentions a rendering marks: all characters' or only the candidates'
    character_list: bool = False  # list the characters the passages mention in the prompt
    runtime: str = "auto"  # what scores the names: auto (transformers, float32) or llama-cpp-python (llama.cpp's
    #                        quantised kernels: whoqa.llm.runtimes; its own LLM key and folder)
    llm_features: str = "select"  # how the LLM's scores enter the feature ranker (feature_ranker.LLM_FEATURES), or
    # "select": the form with the best likelihood in cross-validation on the training books, chosen per fold
    cast: bool = False  # the feature ranker's candidates: every character cluster (issue 29's arm, which the
    #                     reproductions judge), or the book's cast (--cast: people, a person's clusters merged; the
    #                     shipped fit's, with --stage1 whoqa.ranker.features.SERVED: docs/who-ranker.md)
    stage1: str = ",".join(BASE)  # its features, comma-separated (whoqa.ranker.features; "all":
    #                     every one the book gives, the syntax features included; "network", the slot network's
    #                     held-out scores, is named on its own after `whoqa slots train`)
    written: str | None = None  # the reader's written Who answers, linked (a .jsonl[.gz] of rows {"key": question id,
    #                             "linked" or "written": [character ids]}, as `whoqa choice-rows` writes), for the
    #                             written
    #                             features of --stage1
    written_first: bool = False  # the reader's written answer, where it links to a candidate, goes first with the
    #                              probability it was right in the fit's questions; the two stages order the rest
    #                              (one ranking from reading and counting: docs/who-ranker.md)
    written_only: bool = False  # with written_first: where the written answer links to a candidate, the LLM does
    #                             not score names (the first stage orders the rest): a warm answer's time
    written_mix: bool = False  # with written_first: the written answer's candidate takes its place by probability
    #                            (the share it was right) among the two stages' probabilities, scaled to the rest,
    #                            instead of always first: a counted answer surer than the reader stays first
    max_eval_samples: int | None = None  # debug: the first N questions


def prompt_variant(passages: int, prompt_tokens: int, shots: int, shot_policy: str = RerankConfig.shot_policy) -> str:
    """A re-ranking prompt as a run-name suffix, "" at the defaults (+passages3, +tokens640, +shots0, +shotsfixed): a
    fit made on other prompts is its own folder, so it never replaces the fit `ask` serves (which scores with the
    defaults)."""
    d = RerankConfig()
    return "".join(f"+{tag}{v}" for tag, v, default in (("passages", passages, d.passages),
                                                        ("tokens", prompt_tokens, d.prompt_tokens),
                                                        ("shots", shots, d.shots),
                                                        ("shots", shot_policy, d.shot_policy)) if v != default)
