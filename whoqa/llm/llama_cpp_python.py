"""llama.cpp through llama-cpp-python (runtime "llama-cpp-python"): built from source on the user's machine, any
architecture today's llama.cpp knows, its logits, so it generates and scores names from the GGUF file; a build that
crashes on this system is found by a probe in a child process and not used (whoqa.llm.runtimes has the interface
and the choice)."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from whoqa.llm.gpt4all_runtime import LLAMACPP_BATCH

log = logging.getLogger(__name__)

NAME_SEQUENCES = 10  # names continuing one prompt at once (the re-ranking's k: 5 served, 10 measured)
NAMES_READ = "together"  # how `score_names` reads the names (in a re-ranking's key: scores read otherwise differ)


class LlamaCppPythonRuntime:
    """llama.cpp through llama-cpp-python: greedy answers and name scores from the last position's logits. An answer
    reads its prompt afresh (llama.cpp's batched and one-token kernels round differently, so reusing another call's
    cache would make it depend on what was asked before); within a call the KV cache is kept: an answer's tokens
    continue the prompt read once, and the names continue it together (`score_names`, which also keeps a prompt's
    shared start, read in batches of its own, from one call to the next)."""
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
        self._llama_cpp, self._scorer = llama_cpp, None
        self._scored_start: list[int] | None = None  # the shared start the scoring context holds (`score_names`)
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

    def score_names(self, ids: list[int], names: list[list[int]], prefix: int = 0) -> list[float]:
        """Each name's log-likelihood after the prompt (its tokens' log-probabilities summed). The prompt is read once
        in sequence 0 of a context of its own; each name continues it in a sequence of its own, and all the names'
        tokens are read in one batch (one pass for five names, not one per token: a few hundred milliseconds of a
        warm answer on 2 cores). `prefix`: the length of the prompt's start that other prompts share (the
        instruction and fixed shots: `LLMReader.shared_start`), always read in batches of its own, so the previous
        call's cells for it serve again when it is the same: a third of a warm answer's reading saved. The same
        prompt and names, in any order, give the same batches, so the same scores, whatever was asked before."""
        ctx, batch, memory = self._scoring_context()
        llama_cpp = self._llama_cpp
        prefix = prefix if 0 < prefix < len(ids) else 0
        keep = prefix if prefix and self._scored_start == ids[:prefix] else 0
        if keep:
            llama_cpp.llama_memory_seq_rm(memory, 0, keep, -1)  # (the last prompt's cells after the shared start)
        else:
            llama_cpp.llama_memory_clear(memory, True)
        step = self.llama.n_batch
        for lo, hi in ((0, prefix), (prefix, len(ids))):  # the shared start, then the rest: the same cuts either way
            for start in range(max(lo, keep), hi, step):
                batch.set_batch(ids[start:min(start + step, hi)], start, False)
                ctx.decode(batch)
        self._scored_start = ids[:prefix] if prefix else None
        first = _log_softmax(self._logits(ctx, batch.n_tokens() - 1))  # (V,)
        scores = [float(first[toks[0]]) for toks in names]
        room = min(int(self.llama.context_params.n_ctx) - len(ids), step)  # cells left beside the prompt, read in one batch
        rest = sorted(((j, toks[:room + 1]) for j, toks in enumerate(names) if len(toks) > 1),  # (a name longer than
                      key=lambda jt: jt[1])  # the room: its first tokens) (sorted: one batch for the same names in
        # any order; rows of a batch round a little differently by their place in it)
        while rest:
            group, used = [], 0
            while rest and (not group or used + len(rest[0][1]) - 1 <= room) and len(group) < NAME_SEQUENCES:
                group.append(rest.pop(0))
                used += len(group[-1][1]) - 1
            batch.reset()
            b, rows = batch.batch, []
            for seq, (j, toks) in enumerate(group, 1):
                llama_cpp.llama_memory_seq_cp(memory, 0, seq, 0, len(ids))  # (the prompt's cells, shared)
                for i, token in enumerate(toks[:-1]):
                    k = b.n_tokens
                    b.token[k], b.pos[k], b.n_seq_id[k], b.logits[k] = token, len(ids) + i, 1, True
                    b.seq_id[k][0] = seq
                    b.n_tokens += 1
                    rows.append((j, toks[i + 1], k))
            ctx.decode(batch)
            for j, token, k in rows:
                scores[j] += float(_log_softmax(self._logits(ctx, k))[token])
            for seq in range(1, len(group) + 1):
                llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
        return scores

    def _scoring_context(self):
        """(context, batch, memory) for name scores: the model's weights shared with `self.llama`, room for a prompt
        and NAME_SEQUENCES names continuing it (one KV cache for all sequences, so the prompt's cells are shared)."""
        if self._scorer is None:
            from llama_cpp import _internals
            params = type(self.llama.context_params).from_buffer_copy(self.llama.context_params)
            params.n_seq_max, params.kv_unified = NAME_SEQUENCES + 1, True
            with contextlib.redirect_stderr(io.StringIO()):
                ctx = _internals.LlamaContext(model=self.llama._model, params=params, verbose=False)
            batch = _internals.LlamaBatch(n_tokens=self.llama.n_batch, embd=0, n_seq_max=1, verbose=False)
            self._scorer = (ctx, batch, self._llama_cpp.llama_get_memory(ctx.ctx))
        return self._scorer

    def _logits(self, ctx, row: int) -> np.ndarray:
        return np.ctypeslib.as_array(self._llama_cpp.llama_get_logits_ith(ctx.ctx, row),
                                     shape=(self.vocab,)).astype(np.float64)

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
    from whoqa.core.files import atomic_write
    from whoqa.core.runs import digest
    from whoqa.llm.models import cache_dir
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
    except subprocess.TimeoutExpired:  # a machine too busy to answer: not used now, but not kept as a crash
        log.warning("llama-cpp-python gave no answer reading a prompt with %s in 300 s: not used this time", gguf.name)
        return False
    if not works:
        log.warning("llama-cpp-python failed reading a prompt with %s (%s): it is not used", gguf.name, why)
    with contextlib.suppress(OSError):  # (a cache that cannot be written: probed again next time)
        atomic_write(mark, json.dumps({"works": works, "why": why, "llama_cpp": llama_cpp.__version__}))
    return works


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())
