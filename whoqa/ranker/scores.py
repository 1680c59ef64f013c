"""The LLM's name scores: each (question, character) scored once by a local LLM reading the question's passages
with the prompt every path builds (whoqa.llm.prompt), kept per re-ranking folder (scores.jsonl) and resumable;
what both the memory network's re-ranking and the feature ranker's training read."""
from __future__ import annotations

import json
import time
from pathlib import Path

from whoqa.core.store import load_who_set
from whoqa.core.artifacts import read_rows
from whoqa.core.executor import ExecutorConfig
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import digest
from whoqa.core.seed import SEED
from whoqa.core.workspace import Workspace
from whoqa.ranker.config import RerankConfig, prompt_variant
from whoqa.ranker.fits import fit_dir
from whoqa.llm.config import LLMConfig, model_name, passage_variant, runtime_variant
from whoqa.reader.data import build_examples
from whoqa.llm.llama_cpp_python import NAMES_READ
from whoqa.llm.reader import LLMReader
from whoqa.llm.models import model_fingerprint
from whoqa.llm.prompt import shares_start, who_pool
from whoqa.llm.remote import on_cluster
from whoqa.llm.render import WorkspacePassages


def rerank_dir(workspace: Path, run: str, cfg: RerankConfig) -> Path:
    return fit_dir(workspace, run, model_name(cfg.base), cfg.top_k, cfg.candidates,
                   prompt_variant(cfg.passages, cfg.prompt_tokens, cfg.shots, cfg.shot_policy)
                   + passage_variant(cfg.rendering, cfg.marks, cfg.character_list) + runtime_variant(cfg.runtime))



def who_names(ws: Workspace) -> dict[str, dict[int, str]]:
    """book -> character id -> canonical name, from the Who set."""
    chars, _ = load_who_set(ws)
    return {d: {c["id"]: c["name"] for c in cs} for d, cs in chars.items()}


def llm_key(cfg: RerankConfig) -> str:
    """What an LLM name score depends on: the model and the prompt (not whose candidates asked for it)."""
    shown = {f: getattr(cfg, f) for f in ("rendering", "marks", "character_list")
             if getattr(cfg, f) != getattr(RerankConfig, f)}  # (raw passages keep the key they always had)
    if runtime_variant(cfg.runtime):  # (transformers' float32 scores too)
        shown["runtime"] = cfg.runtime
    if cfg.runtime == "llama-cpp-python":  # its names read together since 2026-11-27 (rounding apart from before)
        shown["names"] = NAMES_READ
    if cfg.shot_policy != RerankConfig.shot_policy:
        shown["shot_policy"] = cfg.shot_policy
    return digest([{f: getattr(cfg, f) for f in ("base", "passages", "prompt_tokens", "shots")} | shown,
                   model_fingerprint(cfg.base)])


class NameScores:
    """The LLM's log-likelihood of each (question, name) as the answer, kept in scores.jsonl (one row per LLM call,
    resumable: a question is prompted again only for names it has not scored; a changed model or prompt starts
    afresh)."""

    def __init__(self, ws: Workspace, folder: Path, cfg: RerankConfig, progress: bool = True, device=None,
                 executor: ExecutorConfig = ExecutorConfig()):
        self.ws, self.cfg, self.progress, self.device, self.executor = ws, cfg, progress, device, executor
        self.key = llm_key(cfg)
        self.path = folder / "scores.jsonl"
        self.done: dict[int, dict[int, float]] = {}
        self.seconds: dict[int, float] = {}  # the LLM's seconds per question, over its calls
        self.calls: dict[int, int] = {}
        for row in read_rows(self.path):  # a line cut by an interruption is left out: those names are scored again
            if row.get("key") == self.key:
                self._keep(row)

    def _keep(self, row: dict) -> None:
        q = row["question_id"]
        self.done.setdefault(q, {}).update(zip(row["candidates"], row["llm"]))
        self.seconds[q] = self.seconds.get(q, 0.0) + row["seconds"]
        self.calls[q] = self.calls.get(q, 0) + 1

    def ensure(self, wanted: dict[int, list[int]]) -> None:
        """Score every question's wanted character ids it has not scored yet."""
        todo = {q: [c for c in cs if c not in self.done.get(q, {})] for q, cs in wanted.items()}
        todo = {q: cs for q, cs in todo.items() if cs}
        if not todo:
            return
        ws, cfg = self.ws, self.cfg
        names = who_names(ws)
        who = {q["question_id"]: q for q in load_who_set(ws)[1]}
        examples = {e.question_id: e for e in build_examples(ws, "bm25f", cfg.passages, progress=False)}
        pool = who_pool(ws)  # the shots `ask` draws for the same question (whoqa.llm.prompt)
        plain = not passage_variant(cfg.rendering, cfg.marks, cfg.character_list)
        rendered = WorkspacePassages(ws, "bm25f")
        items = []  # what one LLM call reads: (qid, candidates, question, passages, names, shots, starts, order, list,
        #             shared start)
        for qid, cs in todo.items():
            q, e = who[qid], examples.get(qid)
            d = q["document_id"]
            passages, listed = (e.passages if e else []), []
            if e and not plain:
                passages, _, listed = rendered.of(d, qid, cfg.passages, cfg.rendering, cfg.marks, cfg.character_list,
                                                  cs)
            items.append((qid, cs, q["question"], passages, [names[d][c] for c in cs],
                          pool.shots(d, q["question"], cfg.shots, SEED, qid, cfg.shot_policy),
                          e.starts if e else None, LLMConfig.order, listed,
                          shares_start(cfg.shots, cfg.shot_policy)))
        reader = {"base": cfg.base, "prompt_tokens": cfg.prompt_tokens, "scores": True, "runtime": cfg.runtime}
        if self.executor.executor == "ray":
            rows = (row for batch in on_cluster("scores", items, LLMReader, reader, self.executor) for row in batch)
        else:
            llm = LLMReader(**reader, device=self.device)

            def one(item):
                t = time.perf_counter()
                qid, cs, *prompt = item
                return {"question_id": qid, "candidates": cs, "llm": llm.name_scores(*prompt),
                        "seconds": round(time.perf_counter() - t, 3)}
            rows = map(one, items)
        bar = progress_bar(total=len(todo), desc="LLM name scores", unit="q", progress=self.progress)
        with self.path.open("a") as out:
            for row in rows:
                row = {"question_id": row["question_id"], "key": self.key, "candidates": row["candidates"],
                       "llm": row["llm"], "seconds": row["seconds"]}
                out.write(json.dumps(row) + "\n")
                out.flush()
                self._keep(row)
                bar.update(1)
        bar.close()

    def of(self, qid: int, cs: list[int]) -> list[float]:
        return [self.done[qid][c] for c in cs]
