"""The local LLM's per-question work (name scores, answers) as Ray tasks, for corpora one machine reads too slowly
(`whoqa rerank --executor ray`, `whoqa reader llm --executor ray`).

Why this shape: the driver builds every prompt's inputs (question, passages, names, few shots) from the workspace, so
workers need no workspace, only the model; a batch of questions is one task (the model is loaded once per worker
process, by the executor's initializer); the rows come back to the driver, which appends them to the same resumable
JSONL the local path writes. See whoqa.core.executor for retries and the failure of one task.
"""
from __future__ import annotations

import time
from typing import Iterator

from whoqa.core.executor import ExecutorConfig, ray_map

BATCH = 8  # questions per task: a few minutes of a 0.5B model's work on one CPU, so a lost node costs little
LLM_MEMORY_MB = 4000  # what a task declares: the 0.5B's torch weights (2.4 GB) and its activations

_reader = None  # per worker process: the model, loaded once


def _load(make, kwargs: dict) -> None:
    global _reader
    _reader = make(**kwargs)


def _score(items: list[tuple]) -> list[dict]:
    """items: (question id, candidate ids, question, passages, names, shots, starts, order, character list,
    shared start)."""
    out = []
    for qid, cs, question, passages, names, shots, starts, order, listed, shared in items:
        t = time.perf_counter()
        llm = _reader.name_scores(question, passages, names, shots, starts, order, listed, shared)
        out.append({"question_id": qid, "candidates": cs, "llm": llm, "seconds": round(time.perf_counter() - t, 3)})
    return out


def _answer(items: list[tuple]) -> list[dict]:
    """items: (question id, document id, question, passages, shots, starts, order, character list)."""
    out = []
    for qid, doc, question, passages, shots, starts, order, listed in items:
        t = time.perf_counter()
        text, info = _reader.answer(question, passages, shots, starts, order, keep_prompt=True, characters=listed)
        out.append({"question_id": qid, "document_id": doc, "prediction": text, **info,
                    "seconds": round(time.perf_counter() - t, 3)})
    return out


def on_cluster(kind: str, items: list[tuple], make, reader: dict, executor: ExecutorConfig,
               batch: int = BATCH) -> Iterator[list[dict]]:
    """The rows of `kind` ("scores" or "answers") for every item, a batch at a time as its task finishes, each
    worker's model made once by make(**reader) (whoqa.llm.reader.LLMReader); a batch
    whose task failed on every try raises (its questions are done again by the next run, as after an interruption)."""
    fn = {"scores": _score, "answers": _answer}[kind]
    cfg = ExecutorConfig(executor.executor, executor.ray_address, executor.task_cpus,
                         max(executor.task_memory_mb, LLM_MEMORY_MB), executor.retries)
    batches = {str(i): (items[i:i + batch],) for i in range(0, len(items), batch)}

    def failed(key: str, why: str):
        raise RuntimeError(f"LLM task of questions {[x[0] for x in batches[key][0]]} failed: {why}; run the same "
                           f"command again (the rows written are kept)")
    yield from ray_map(fn, batches, cfg, failed, initializer=_load, initargs=(make, reader))
