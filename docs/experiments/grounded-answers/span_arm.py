"""Issue 52, the span arm: the answer copied from the passages, chosen by the LLM's likelihood, instead of written.

The ceiling (ceiling.py) showed the passages the 0.5B reads hold the answer far better than it writes it. Here the
same prompt `ask` builds for a non-Who question (the served passages, shots and budget) is read once, and each
candidate span of the passages it kept (spaCy's noun chunks, entities, prepositional phrases and short clauses of
those passages) is scored as the answer: its tokens' log-probabilities after the prompt, the way names are scored for
Who questions. Every token's log-probability is kept, so the aggregation (sum, mean, in between) is chosen on one
set of books and judged on another.

    .venv/bin/python docs/experiments/grounded-answers/span_arm.py --workspace WS [--home HOME] [--per-book N] --out F.jsonl.gz

WS: prepared books with questions (the main job's workspace for the seen books; `ws/eval-data/unseen` with
--home ws for the books no reader read). Resumable: questions already in F are skipped.
"""
from __future__ import annotations

import argparse
import os
import re
import gzip
import json
import time
from pathlib import Path

import numpy as np

from whoqa.core.lexicon import is_who_question, load_nlp
from whoqa.core.store import load_questions
from whoqa.llm.config import LLMConfig
from whoqa.reader.data import bm25f_passages
from whoqa.llm.prompt import ShotPool
from whoqa.service import Service

CLAUSES = {"advcl", "xcomp", "ccomp", "relcl", "acl", "pcomp"}
MAX_WORDS = 12
MAX_CANDIDATES = 60
PRONOUNS = {"he", "she", "it", "they", "him", "her", "them", "i", "you", "we", "me", "us", "his", "its", "their",
            "this", "that", "who", "which", "what"}


def candidates(nlp, passages: list[str], question: str) -> list[str]:
    """Short spans of the passages that could be an answer, best passage first: noun chunks, named entities,
    prepositional phrases ("in the garden") and short clauses ("because he feared her"), each once; none made only
    of the question's words or of pronouns."""
    asked = {re.sub(r"['’]s$", "", w.lower().strip("?.,!;:\"'")) for w in question.split()}  # Edward's -> edward
    seen, out = set(), []
    for doc in nlp.pipe(passages):
        spans = list(doc.noun_chunks) + list(doc.ents)
        for t in doc:
            if t.dep_ == "prep" or t.dep_ in CLAUSES or t.dep_ in ("dobj", "attr", "pobj"):
                sub = doc[t.left_edge.i:t.right_edge.i + 1]
                spans.append(sub)
        for s in spans:
            words = [w.text for w in s if not w.is_punct]
            key = " ".join(w.lower() for w in words)
            if not words or len(words) > MAX_WORDS or key in seen:
                continue
            if all(w.lower() in PRONOUNS or re.sub(r"['’]s$", "", w.lower()) in asked or not w.isalnum()
                   for w in words):
                continue
            seen.add(key)
            out.append(s.text.strip())
    return out[:MAX_CANDIDATES]


class Scorer:
    """The 0.5B through llama-cpp-python, the prompt read once (the last position's logits only), then the greedy
    answer (as `ask` writes it) and each candidate's tokens in one call each from the prompt's cache, with every
    position's logits kept for those calls only (logits for all 512 prompt positions would cost more than the prompt)."""

    def __init__(self, base: str, context: int):
        import llama_cpp
        from whoqa.llm.models import locate
        folder, gguf = locate(base)
        threads = int(os.environ.get("SPAN_THREADS", "2"))
        self.llama = llama_cpp.Llama(str(Path(folder) / gguf), n_ctx=context, n_batch=512, n_threads=threads,
                                     n_threads_batch=threads, logits_all=True, verbose=False)
        self._last_logits = lambda: np.ctypeslib.as_array(llama_cpp.llama_get_logits(self.llama.ctx),
                                                           shape=(self.llama.n_vocab(),)).astype(np.float64)

    @staticmethod
    def _log_softmax(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return x - np.logaddexp.reduce(x)

    def _eval(self, ids: list[int], every: bool) -> None:
        self.llama._logits_all = every  # (read by each eval call: all positions' logits, or the last one's)
        self.llama.eval(ids)

    def read(self, ids: list[int]) -> None:
        self.llama.reset()
        self._eval(ids, False)
        self.n, self.first = len(ids), self._last_logits()  # (V,)

    def greedy(self, stop: list[int], new_tokens: int) -> list[int]:
        out, logits = [], self.first
        for _ in range(new_tokens):
            token = int(np.argmax(logits))
            if token in stop:
                break
            out.append(token)
            self._eval([token], False)
            logits = self._last_logits()
        self.llama.n_tokens = self.n
        return out

    def token_logprobs(self, toks: list[int]) -> list[float]:
        self.llama.n_tokens = self.n
        lps = [float(self._log_softmax(self.first)[toks[0]])]
        if len(toks) > 1:
            self._eval(toks[:-1], True)
            lps += [float(self._log_softmax(self.llama.scores[self.n + i])[toks[i + 1]]) for i in range(len(toks) - 1)]
        self.llama.n_tokens = self.n
        return lps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--home", default=None, help="the training workspace whose models and shots serve")
    ap.add_argument("--per-book", type=int, default=None)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    from whoqa.llm.reader import LLMReader, clean_answer
    from whoqa.llm.shorten import shortener
    svc = Service(a.workspace, fits_from=a.home)
    llm = svc.models.routes().llm
    cfg = LLMConfig()
    reader = LLMReader(llm, None, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat, cfg.half, "llama-cpp-python")
    scorer = Scorer(llm, cfg.prompt_tokens + cfg.max_new_tokens + 2 * MAX_WORDS + 64)
    reader.backend = None  # (its own copy of the model is not needed: the scorer reads every prompt)
    nlp = load_nlp()
    done = set()
    if a.out.is_file():
        done = {json.loads(l)["question_id"] for l in gzip.open(a.out, "rt")}
    by_book = load_questions(svc.ws)
    t0, n = time.perf_counter(), 0
    for b in sorted(by_book):
        if not (svc.ws.books / b).is_dir():
            continue
        qs = [q for q in by_book[b] if not is_who_question(q["question"])][:a.per_book]
        ob = svc.open(b)
        for q in qs:
            if q["question_id"] in done:
                continue
            question = q["question"]
            query = ob.query(question)
            wins = svc.passages(ob, query)
            passages, starts = bm25f_passages(ob, query, cfg.top_k, True, wins)
            if not passages:
                continue
            shots = ShotPool.of(svc.models.pool(who=False)).shots(b, question, cfg.shots, cfg.seed)
            ids, kept = reader.prompt(question, passages, shots, starts, cfg.order)
            scorer.read(ids)
            written = shortener(cfg.shorten)(clean_answer(reader.tokenizer.decode(
                scorer.greedy(reader.stop, cfg.max_new_tokens), skip_special_tokens=True)), kept)
            scored = [[text, scorer.token_logprobs(reader._ids(text))] for text in candidates(nlp, kept, question)]
            row = {"question_id": q["question_id"], "book": b, "question": question,
                   "answers": [q["answer1"], q["answer2"]], "prompt_tokens": len(ids), "passages": len(kept),
                   "written": written, "kept": kept, "candidates": scored}
            with gzip.open(a.out, "at") as f:
                f.write(json.dumps(row) + "\n")
            n += 1
            print(f"{n} {b[:8]} {len(scored)} spans {time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
