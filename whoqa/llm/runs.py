"""An LLM run: every question of a workspace answered zero-shot by a local LLM (whoqa.llm.reader.LLMReader), its
answers scored as the full task scores the FiD rows.

Artifact: WS/reader/llm/<name>/ (run.json: config, inputs, code; predictions.jsonl, appended per question, so an
interrupted run resumes; summary.json: metrics and seconds per question). A run of another config or model is moved
to WS/reader/llm-archive/, never mixed in.
"""
from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path

from whoqa.core.artifacts import read_rows
from whoqa.core.files import atomic_write
from whoqa.core.distributed import barrier, shard, world
from whoqa.core.executor import ExecutorConfig
from whoqa.core.metrics import text_metrics
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import RUN_SUMMARY, claim, file_digest, provenance, read_run_file
from whoqa.core.seed import SEED, set_seed
from whoqa.core.workspace import Workspace
from whoqa.llm.config import LLMConfig, llm_record, llm_run_name
from whoqa.reader.data import build_examples, examples_path
from whoqa.llm.reader import LLMReader
from whoqa.llm.models import model_fingerprint
from whoqa.llm.prompt import ShotPool
from whoqa.llm.remote import on_cluster
from whoqa.llm.render import WorkspacePassages, check_rendering
from whoqa.reader.reports import LLMRunReport
from whoqa.llm.shorten import SHORTENERS, shortener

log = logging.getLogger(__name__)


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
        pool = ShotPool.of([(e.question, e.answers[0], e.document_id, e.question_id) for e in examples])
        rendered = WorkspacePassages(ws, cfg.context)
        items = []  # what one answer reads: (qid, book, question, passages, shots, starts, order, character list)
        for e in todo:
            passages, starts, listed = e.passages, e.starts, []
            if cfg.rendering != "raw" or cfg.character_list:
                passages, starts, listed = rendered.of(e.document_id, e.question_id, cfg.top_k, cfg.rendering, "all",
                                                       cfg.character_list)
            items.append((e.question_id, e.document_id, e.question, passages,
                          pool.shots(e.document_id, e.question, cfg.shots, cfg.seed, int(e.question_id)),
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
