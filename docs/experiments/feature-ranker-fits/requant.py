"""Issue 51/54: the served Who fit with the 0.5B requantised from Q4_K_M to Q4_0, whose prompt llama.cpp reads about
a quarter faster on these cores (a 500-token prompt: 1.79 s against 2.46 s, 2 threads; Q8_0 2.42 s, F16 2.30 s).
Requantising a quantised model loses a little more of the weights, so it is judged as the prompt sizes were:

    .venv/bin/python docs/experiments/feature-ranker-fits/requant.py --workspace ws51 --gguf Q40.gguf

(--gguf is made from the installed model when it is not there: llama.cpp's own quantiser, ~10 s). Rows to
requant.jsonl, per-question ranks to requant_ranks.jsonl.gz, as prompt_size.py's. Resumable per fold seed."""
from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from whoqa.evaluation.rerank import rerank
from whoqa.ranker.config import RerankConfig
from whoqa.llm.models import locate

SEEDS = (13, 14, 15)


def requantise(dest: Path, ftype: str = "Q4_0") -> None:
    import llama_cpp
    folder, gguf = locate(RerankConfig.base)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(str(Path(folder) / gguf).encode(), str(dest).encode(), ctypes.byref(params)):
        raise RuntimeError(f"llama.cpp could not requantise {gguf}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--gguf", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS))
    a = ap.parse_args()
    if not a.gguf.is_file():
        requantise(a.gguf)
    out = a.out / "requant.jsonl"
    done = {r["seed"] for r in map(json.loads, out.read_text().splitlines())} if out.is_file() else set()
    for seed in a.seeds:
        if seed in done:
            continue
        t = time.perf_counter()
        cfg = replace(RerankConfig(), base=str(a.gguf.resolve()), candidates="features", fold_seed=seed,
                      runtime="llama-cpp-python")
        s = rerank(a.workspace, None, cfg, progress=True).record
        row = {"arm": "Q4_0 (requantised), 512 tokens, 3 shots", "seed": seed,
               "first_stage": {k: s["candidates"][k] for k in ("p@1", "p@5", "mrr")},
               "with_llm": {k: s["combined"][k] for k in ("p@1", "p@5", "mrr")}, "ece": s["ece"],
               "questions": s["questions"], "seconds": round(time.perf_counter() - t, 1)}
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        with gzip.open(a.out / "requant_ranks.jsonl.gz", "at") as f:
            f.write(json.dumps({"arm": row["arm"], "seed": seed, "ranks": s["ranks"]}) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
