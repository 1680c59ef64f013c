"""llama-cpp-cffi 0.4.42 timed on the prompts `whoqa bench llm` times (issue 41's runtime comparison).

Its package `__init__` imports transformers and pins huggingface-hub<0.29, so its compiled CPU module is loaded
directly from the unpacked wheel; on Debian 12 it needs a one-line C++ shim (ENVIRONMENT.md) in LD_PRELOAD:

    pip download --no-deps llama-cpp-cffi==0.4.42 -d W && cd W && unzip -q llama_cpp_cffi-*.whl 'llama/*'
    printf '#include <exception>\\nextern "C" void __cxa_call_terminate(void*) noexcept { std::terminate(); }\\n' > shim.cpp
    g++ -shared -fPIC -O2 -o libshim.so shim.cpp
    LD_PRELOAD=$PWD/libshim.so OMP_NUM_THREADS=2 .venv/bin/python docs/experiments/llm-name-scores/runtimes/bench_cffi.py \
        --workspace ws41 --wheel W [--threads 2]

It prints the same figures as `whoqa bench llm` (greedy, the same prompt token ids, 512-token batches)."""
import argparse
import importlib.util
import json
import resource
import statistics
import time
from pathlib import Path

import numpy as np

from whoqa.core.workspace import Workspace
from whoqa.llm.config import LLMConfig
from whoqa.reader.data import build_examples
from whoqa.llm.reader import LLMReader, locate

p = argparse.ArgumentParser()
p.add_argument("--workspace", default="ws41")
p.add_argument("--wheel", required=True, help="the folder the wheel was unpacked in")
p.add_argument("--base", default="qwen2.5-coder-0.5b")
p.add_argument("--threads", type=int, default=2)
p.add_argument("-n", type=int, default=8)
p.add_argument("--new-tokens", type=int, default=16)
a = p.parse_args()

cfg = LLMConfig()
examples = build_examples(Workspace(a.workspace), "bm25f", cfg.top_k, progress=False)[:a.n]
reader = LLMReader(a.base, None, cfg.prompt_tokens, a.new_tokens, runtime="llamacpp")  # the prompts only
prompts = [reader.prompt(e.question, e.passages, (), e.starts, cfg.order)[0] for e in examples]
del reader
folder, gguf = locate(a.base)

so = next((Path(a.wheel) / "llama").glob("_llama_cpp_cpu*.so"))
spec = importlib.util.spec_from_file_location("_llama_cpp_cpu", so)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
lib, ffi = module.lib, module.ffi

t = time.perf_counter()
lib.llama_backend_init()
mp = lib.llama_model_default_params()
model = lib.llama_model_load_from_file(str(Path(folder) / gguf).encode(), mp)
cp = lib.llama_context_default_params()
cp.n_ctx, cp.n_batch, cp.n_ubatch = cfg.prompt_tokens + a.new_tokens + 64, 512, 512
cp.n_threads = cp.n_threads_batch = a.threads
ctx = lib.llama_init_from_model(model, cp)
vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
load = time.perf_counter() - t


def decode(tokens):
    buf = ffi.new("int32_t[]", tokens)
    if lib.llama_decode(ctx, lib.llama_batch_get_one(buf, len(tokens))) != 0:
        raise RuntimeError("llama_decode failed")
    logits = lib.llama_get_logits_ith(ctx, -1)  # (V,) float32
    return int(np.frombuffer(ffi.buffer(logits, vocab * 4), dtype=np.float32).argmax())


prefill, generate = [], []
for ids in prompts:
    lib.llama_kv_self_clear(ctx)
    t0 = time.perf_counter()
    token = decode(ids)
    t1 = time.perf_counter()
    for _ in range(a.new_tokens - 1):
        token = decode([token])
    t2 = time.perf_counter()
    prefill.append(t1 - t0)
    generate.append((a.new_tokens - 1) / (t2 - t1))
tokens = statistics.fmean(len(x) for x in prompts)
print(json.dumps({"model": a.base, "runtime": "llama-cpp-cffi 0.4.42 (cpu module)", "threads": a.threads,
                  "questions": len(prompts), "load_s": round(load, 1), "prompt_tokens_mean": round(tokens),
                  "prompt_tokens_per_s": round(tokens / statistics.median(prefill), 1),
                  "generation_tokens_per_s": round(statistics.median(generate), 1),
                  "answer_s (prompt + 8 tokens)": round(statistics.median(prefill) + 8 / statistics.median(generate), 2),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}, indent=1))
