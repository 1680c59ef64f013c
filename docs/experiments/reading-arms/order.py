"""Passages in the order they were ranked, against the book's order that `ask` serves (DOS-RAG, arXiv 2506.03989:
retrieve, then restore the book's order).

Each of the target's first N non-Who questions per book answered exactly as `ask` answers it (its route, the LLM run's
options, grounding and the second look: `whoqa.service.scorers.llm_answer`), with one change: the passages kept in
the prompt are given best first (`LLMConfig.order = "rank"`). Rows have `eval --data`'s shape (its `_other_row`), so
table.py scores them beside what `eval --data` served (book order) from the same machine's cache.

    python docs/experiments/reading-arms/order.py --workspace WS --target WS/eval-data/unseen --per-book 10 \
        --out docs/experiments/reading-arms/order_rank_unseen_first10.jsonl.gz

Resumable: questions already in the output are skipped.
"""
from __future__ import annotations

import time
from dataclasses import replace

from whoqa.core.query import Query
from whoqa.evaluation.unseen import _other_row
from whoqa.retrieval.bm25f import NothingMatched
from whoqa.service.scorers import SCORERS


def answer_rank_order(svc, q: dict) -> dict:
    route = svc.route(q["document_id"], q["question"])
    if route.name != "llm":  # (a Who-like question ranked by the cast, or a trained reader: not this arm's change)
        try:
            return {**_other_row(q, svc.answer(q["document_id"], q["question"]), None), "arm_changed": False}
        except NothingMatched as e:
            return _other_row(q, None, str(e))
    ranked = replace(route, options={**(route.options or {}), "order": "rank"})
    t0 = time.perf_counter()
    with svc.lock:
        ob = svc.open(q["document_id"])
        try:
            query = ob.read(Query.ask(q["question"]))
        except NothingMatched as e:
            return _other_row(q, None, str(e))
        ans = SCORERS["llm"](svc, ob, query, ranked)
        svc.models.settle()
    ans.route, ans.reason, ans.seconds = route.name, route.reason, round(time.perf_counter() - t0, 4)
    return {**_other_row(q, ans, None), "arm_changed": True}


if __name__ == "__main__":
    from arm import run
    run(lambda svc: lambda q: answer_rank_order(svc, q), lambda r: f"found={r['found']} {r['answer']!r}", __doc__)
