"""A local language model as the reader (`--reader llm --reader-base PATH`): a decoder-only causal LM that
transformers loads (a folder, a hub id, or a GGUF file), prompted zero-shot with the question and its top-k passages,
answering greedily in a few words.

Why: many people now answer questions with a small local LM instead of training a reader; this puts one on the same
passages and metrics as the FiD rows (`whoqa eval`'s full task). The prompt (whoqa.llm.prompt) is the model's own
chat template when it has one (each family's format: SmolLM2's ChatML, Gemma's turns, Llama's headers), else a plain
"Question: ... Answer:" prompt. Passages are added best first and the last one is cut so that prompt + answer fit the
model's context.

The model's files are whoqa.llm.models, where it runs whoqa.llm.runtimes, and the runs over a workspace's
questions whoqa.llm.runs.
"""
from __future__ import annotations

import logging
from pathlib import Path

from whoqa.llm.config import LLMConfig
from whoqa.llm.models import (_causal_lm, _tokenizer, cache_dir, gguf_metadata, join_parts,  # noqa: F401
                              joined_model, locate, model_fingerprint, packaged_models)
from whoqa.llm.prompt import INSTRUCTION, ShotPool, few_shots, prompt_text, question_pool  # noqa: F401
from whoqa.llm.render import shown
from whoqa.llm.runtimes import (LlamaCppPythonRuntime, LlamaCppRuntime, TransformersRuntime,  # noqa: F401
                                   check_runtime, choose_runtime, llamacpp, scoring_runtime)
from whoqa.llm.shorten import shortener
from whoqa.core.query import Query
from whoqa.retrieval.bm25f import NothingMatched, Window
from whoqa.retrieval.openbook import OpenBook

log = logging.getLogger(__name__)


class LLMReader:
    """A causal LM answering from passages: the prompt (chat template or plain), greedy decoding, the first line; or
    each candidate name's log-likelihood as the answer. Where it runs is a runtime (whoqa.llm.runtimes: transformers,
    llama.cpp through gpt4all, or llama-cpp-python); "auto" takes gpt4all's llama.cpp for a GGUF file it loads, unless
    `scores` (names need token probabilities, which gpt4all does not give: transformers then)."""

    def __init__(self, base: str, device=None, prompt_tokens: int = LLMConfig.prompt_tokens,
                 max_new_tokens: int = LLMConfig.max_new_tokens, chat: str = LLMConfig.chat,
                 half: bool = LLMConfig.half, runtime: str = LLMConfig.runtime, scores: bool = False):
        from transformers.utils import logging as hf_logging
        if chat not in ("auto", "plain"):
            raise ValueError(f"unknown prompt {chat!r}: use auto (the model's chat template) or plain")
        check_runtime(runtime)
        hf_logging.disable_progress_bar()
        folder, gguf = locate(base)
        chosen = choose_runtime(runtime, bool(gguf), scores)
        try:
            self.tokenizer = _tokenizer(folder, gguf)
        except ImportError as e:  # GGUF needs the gguf package (and accelerate)
            raise RuntimeError(f"loading {base}: {e}") from e
        llama = None
        if chosen == "llamacpp" and gguf:  # (named for a model folder: transformers reads it, as it always did)
            llama = llamacpp(Path(folder) / gguf, prompt_tokens + max_new_tokens, strict=runtime == "llamacpp",
                             architecture=gguf_metadata(Path(folder) / gguf)["architecture"])
        if chosen == "llama-cpp-python":
            if not gguf:
                raise ValueError(f"--runtime llama-cpp-python reads GGUF files; {base} is not one (use transformers)")
            self.backend = LlamaCppPythonRuntime(Path(folder) / gguf, prompt_tokens + max_new_tokens)
        elif llama is not None:
            self.backend = LlamaCppRuntime(llama, prompt_tokens + max_new_tokens)
        else:
            try:
                model = _causal_lm(folder, gguf)
            except ImportError as e:
                raise RuntimeError(f"loading {base}: {e}") from e
            if model.config.is_encoder_decoder:
                raise ValueError(f"{base} is an encoder-decoder model: use it as the FiD reader (`whoqa reader train`)")
            self.backend = TransformersRuntime(model, device, half)
        self.runtime = self.backend.name
        window = self.backend.window or prompt_tokens + max_new_tokens
        self.chat = chat == "auto" and bool(getattr(self.tokenizer, "chat_template", None))
        self.budget = min(prompt_tokens, window - max_new_tokens)  # prompt tokens, answer excluded
        self.max_new_tokens = max_new_tokens
        self.stop = sorted({t for t in [self.tokenizer.eos_token_id, *self.backend.ends, *self._ids("\n")]
                            if t is not None})
        self.pad = next((t for t in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id, *self.stop)
                         if t is not None), 0)

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def count_tokens(self, text: str) -> int:
        return len(self._ids(text))

    def _render(self, question: str, passages: list[str], shots=(), characters=()) -> list[int]:
        """The prompt's tokens: whoqa.llm.prompt's text in the model's chat template, or plain."""
        text = prompt_text(question, passages, shots, characters)
        if self.chat:
            ids = self.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                     tokenize=True)
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            return list(ids)
        bos = [self.tokenizer.bos_token_id] if self.tokenizer.bos_token_id is not None else []
        return bos + self._ids(text + "\nAnswer:")

    def prompt(self, question: str, passages: list[str], shots=(), starts: list[int] | None = None,
               order: str = "rank", characters=()) -> tuple[list[int], list[str]]:
        """(prompt token ids within the budget, the passages kept as given): passages chosen best first, the last one kept cut to
        what fits (a stub of under 16 tokens is dropped: a few words are noise, not evidence); with order "book" and
        their starts, the kept ones are then given in the book's order. Shots (question, answer) come first;
        `characters` (names, whoqa.llm.render.characters) are listed after the passages."""
        kept: list[tuple[int, str]] = []  # (rank, text)

        def ordered(chosen):
            return sorted(chosen, key=lambda rp: starts[rp[0]]) if order == "book" and starts else chosen

        def render(chosen):
            return self._render(question, [t for _, t in ordered(chosen)], shots, characters)
        ids = render(kept)
        for rank, p in enumerate(passages):
            longer = render(kept + [(rank, p)])
            if len(longer) <= self.budget:
                kept, ids = kept + [(rank, p)], longer
                continue
            piece = self._ids(p)
            cut = len(piece) - (len(longer) - self.budget)
            while cut >= 16:  # (re-tokenising a cut text can add a token or two)
                head = self.tokenizer.decode(piece[:cut])
                longer = render(kept + [(rank, head)])
                if len(longer) <= self.budget:
                    kept, ids = kept + [(rank, head)], longer
                    break
                cut -= len(longer) - self.budget
            break
        if len(ids) > self.budget:
            raise ValueError(f"the question alone takes {len(ids)} tokens, over the prompt budget of {self.budget}: "
                             "raise --prompt-tokens")
        return ids, [t for _, t in ordered(kept)]

    def answer(self, question: str, passages: list[str], shots=(), starts: list[int] | None = None,
               order: str = "rank", keep_prompt: bool = False, characters=()) -> tuple[str, dict]:
        """Greedy answer (its first line, post-processed) and what it took: prompt tokens, passages kept (and with
        keep_prompt, the prompt's text)."""
        ids, kept = self.prompt(question, passages, shots, starts, order, characters)
        info = {"prompt_tokens": len(ids), "passages": len(kept)}
        if keep_prompt:
            info["prompt"] = self.tokenizer.decode(ids, skip_special_tokens=False)
            info["passages_used"] = kept
        return clean_answer(self.backend.generate(ids, self.max_new_tokens, self.stop, self.pad, self.tokenizer)), info

    def name_scores(self, question: str, passages: list[str], names: list[str], shots=(),
                    starts: list[int] | None = None, order: str = "rank", characters=(),
                    shared_start: bool = False) -> list[float]:
        """Each name's log-likelihood as the whole answer after the same prompt `answer` builds (a runtime that
        gives token probabilities). `shared_start`: the shots are the same for every question of the book (none, or
        the fixed shot policy), so a runtime that can keeps the prompt's start (template, instruction, shots) read
        from one question to the next (`LlamaCppPythonRuntime.score_names`); scores are measured and served alike."""
        ids, _ = self.prompt(question, passages, shots, starts, order, characters)
        names = [self._ids(name) or [self.pad] for name in names]
        return self.backend.score_names(ids, names, prefix=self.shared_start(ids, shots) if shared_start else 0)

    def shared_start(self, ids: list[int], shots=()) -> int:
        """How many of a prompt's tokens every question with these shots begins with: its common start with the
        prompt of an empty question and no passages (the chat template, the instruction, the shots)."""
        bare = self._render("", [], shots)
        n = 0
        while n < min(len(bare), len(ids)) - 1 and bare[n] == ids[n]:
            n += 1
        return n


ANSWER_PREFIXES = ("answer:", "a:", "the answer is", "the answer to the question is")


def clean_answer(text: str) -> str:
    """The first non-empty line as a short answer: without a label the model may repeat ("Answer:", "The answer
    is"), surrounding quotes or a final full stop."""
    line = next((l.strip() for l in text.splitlines() if l.strip()), "")
    for prefix in ANSWER_PREFIXES:
        if line.lower().startswith(prefix):
            line = line[len(prefix):].lstrip(" :")
    line = line.strip().strip('"\u201c\u201d').strip()
    return line[:-1].rstrip() if line.endswith(".") and not line.endswith("..") else line


def reading(ob: OpenBook, query: Query, wins: list[Window], pool: ShotPool | list = (),
            cfg: LLMConfig = LLMConfig()) -> tuple[list[str], list[int], list, list]:
    """What the reader is given for a question about an opened book from its windows `wins` (best first; the
    service's passages): (its passages, as the config renders them, their first sentences, a few (question, answer)
    examples of other books from `pool` for the answers' style (the shots the workspace's LLM runs drew for the same
    question: whoqa.llm.prompt), the characters listed after the passages). No window: NothingMatched, rather than
    the model inventing an answer."""
    book = ob.book
    shots = ShotPool.of(pool).shots(book.id, query.text, cfg.shots, cfg.seed)  # as the LLM run measured it
    wins = wins[:cfg.top_k]
    if not wins:
        raise NothingMatched(f"nothing in book {book.id} matches the question's words, so there is nothing to answer "
                             f"from: ask with words the book uses")
    passages, listed = shown(book, wins, cfg.rendering, "all", cfg.character_list)  # ("raw": the windows' text)
    return passages, [w.first for w in wins], shots, listed


def answer_from_book(reader: "LLMReader", ob: OpenBook, query: Query, wins: list[Window], pool: ShotPool | list = (),
                     cfg: LLMConfig = LLMConfig()) -> tuple[str, list[str]]:
    """(answer, passages read) for a question about an opened book, from what `reading` gives the reader of its
    windows `wins`."""
    passages, starts, shots, listed = reading(ob, query, wins, pool, cfg)
    text, info = reader.answer(query.text, passages, shots, starts, cfg.order, keep_prompt=True, characters=listed)
    return shortener(cfg.shorten)(text, info["passages_used"]), info["passages_used"]
