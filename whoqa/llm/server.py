"""An OpenAI-compatible server as the reader (`--llm http://127.0.0.1:11434/v1`, or WHOQA_LLM): Ollama, llama.cpp's
server, llama-cpp-python's, vLLM, LM Studio. The reader a user already runs, often larger than any whoqa installs.

It stands where an LLMReader stands (whoqa.llm.reader): the same prompt text (whoqa.llm.prompt), answers from
/chat/completions (greedy, temperature 0, the server's own chat template), and names scored as answers from
/completions with `echo` and `logprobs` (the prompt's text with "Answer: NAME", each name's tokens' log-probabilities
summed), where the server gives them; one that does not cannot choose among the passages' people, which is said in
one line (`scores` is False). A server that is down or answers badly is one line naming its address.

No tokenizer of the server's model is at hand, so the prompt budget is kept in characters (CHARS_PER_TOKEN).
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from whoqa.llm.config import LLMConfig, is_server, server_name  # noqa: F401 (where callers find them)
from whoqa.llm.prompt import prompt_text

CHARS_PER_TOKEN = 4  # English text's characters per token for common tokenizers: the prompt budget without one
TIMEOUT = 300  # seconds a request may take (a large model on a busy host)


class ServerError(RuntimeError):
    """The server is down, refuses a request, or answers in another shape."""


class ServerReader:
    """The LLMReader interface over an OpenAI-compatible server (module docstring)."""
    runtime = "server"

    def __init__(self, url: str, prompt_tokens: int = LLMConfig.prompt_tokens,
                 max_new_tokens: int = LLMConfig.max_new_tokens, model: str | None = None, timeout: float = TIMEOUT):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.budget = prompt_tokens * CHARS_PER_TOKEN  # (characters)
        self.max_new_tokens = max_new_tokens
        self.model = model or self._first_model()
        self.backend = self  # (the runtime and the reader are one object here)
        self._scores: bool | None = None

    # --- requests ----------------------------------------------------------------------------------------------
    def _request(self, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:200].replace("\n", " ")
            raise ServerError(f"the reader at {self.url} refused {path} (HTTP {e.code}: {detail})") from None
        except (urllib.error.URLError, OSError) as e:
            why = getattr(e, "reason", e)
            raise ServerError(f"no reader answers at {self.url} ({why}): start the server, or give --llm another "
                              f"address") from None
        except ValueError:
            raise ServerError(f"the reader at {self.url} answered {path} with something that is not JSON: is it an "
                              f"OpenAI-compatible server (its address ends in /v1)?") from None

    def _first_model(self) -> str:
        got = self._request("/models")
        try:
            return got["data"][0]["id"]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"the reader at {self.url} lists no model at /models") from None

    # --- the LLMReader interface -------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // CHARS_PER_TOKEN)

    def prompt(self, question: str, passages: list[str], shots=(), starts: list[int] | None = None,
               order: str = "rank", characters=()) -> tuple[str, list[str]]:
        """(the prompt's text within the budget, the passages kept): best first, the last one cut at a word to what
        fits; with order "book" and their starts, the kept ones in the book's order."""
        kept: list[tuple[int, str]] = []

        def render(chosen):
            chosen = sorted(chosen, key=lambda rp: starts[rp[0]]) if order == "book" and starts else chosen
            return prompt_text(question, [t for _, t in chosen], shots, characters), [t for _, t in chosen]
        text, shown = render(kept)
        for rank, p in enumerate(passages):
            longer, more = render(kept + [(rank, p)])
            if len(longer) <= self.budget:
                kept, text, shown = kept + [(rank, p)], longer, more
                continue
            room = len(p) - (len(longer) - self.budget)
            head = p[:room].rsplit(" ", 1)[0] if room > 64 else ""
            if head:
                kept = kept + [(rank, head)]
                text, shown = render(kept)
            break
        return text, shown

    def answer(self, question: str, passages: list[str], shots=(), starts: list[int] | None = None,
               order: str = "rank", keep_prompt: bool = False, characters=()) -> tuple[str, dict]:
        from whoqa.llm.reader import clean_answer
        text, kept = self.prompt(question, passages, shots, starts, order, characters)
        got = self._request("/chat/completions", {"model": self.model, "temperature": 0, "seed": 13,
                                                   "max_tokens": self.max_new_tokens,
                                                   "messages": [{"role": "user", "content": text}]})
        try:
            reply = got["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"the reader at {self.url} answered /chat/completions without a message") from None
        info = {"prompt_tokens": self.count_tokens(text), "passages": len(kept)}
        if keep_prompt:
            info["prompt"], info["passages_used"] = text, kept
        return clean_answer(reply), info

    @property
    def scores(self) -> bool:
        """Whether the server gives the prompt's token log-probabilities (asked once)."""
        if self._scores is None:
            try:
                self._name_logprob("Question: Who?\nAnswer:", " Tom")
                self._scores = True
            except ServerError:
                self._scores = False
        return self._scores

    def _name_logprob(self, prefix: str, name: str) -> float:
        """The summed log-probability of `name`'s tokens after `prefix` (echo: the prompt's own tokens scored)."""
        got = self._request("/completions", {"model": self.model, "prompt": prefix + name, "max_tokens": 1,
                                             "temperature": 0, "echo": True, "logprobs": 1})
        try:
            lp = got["choices"][0]["logprobs"]
            offsets, values = lp["text_offset"], lp["token_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"the reader at {self.url} gives no token log-probabilities (/completions with echo "
                              f"and logprobs)") from None
        total = sum(v for o, v in zip(offsets, values) if o >= len(prefix) and o < len(prefix) + len(name)
                    and v is not None)
        return float(total)

    def name_scores(self, question: str, passages: list[str], names: list[str], shots=(),
                    starts: list[int] | None = None, order: str = "rank", characters=(),
                    shared_start: bool = False) -> list[float]:
        """Each name's log-likelihood as the answer after the prompt (plain: "...\\nAnswer: NAME"); one request a
        name (a server that caches prompts, as llama.cpp's does, reads the shared prompt once)."""
        if not self.scores:
            raise ServerError(f"the reader at {self.url} gives no token log-probabilities, so it cannot score names")
        text, _ = self.prompt(question, passages, shots, starts, order, characters)
        prefix = text + "\nAnswer:"
        return [self._name_logprob(prefix, " " + n) for n in names]
