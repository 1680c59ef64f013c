"""Issue 64, item 1: the question rewritten by the reader into the sentence that would answer it (hypothetical-answer
search, HyDE: Gao et al. 2022), fused with the question's own search. Recall@k of an answer-bearing window (issue 52's
criterion: a span of ROUGE-L >= 0.5 against a gold answer) on the main job's 10 unseen books' other questions, the
passages as `ask` serves them (PassageConfig: "pool", MiniLM over BM25F's first 300 hits), against:

    hyde           the same search with the question followed by the reader's hypothetical sentence
    hyde + served  the two rankings fused by reciprocal rank fusion (k 60), windows as served

The reader (the installed 1.5B, the one that answers other questions) writes the sentence from the question alone, no
passage: "Write one sentence, as the novel might say it, that answers ...". Hypotheses are kept per question in
hyde_hypotheses.jsonl.gz (resumable: a question already there is not asked again).

    whoqa eval --workspace EMPTY --data ws-split/unseen --kinds other   (prepares EMPTY/eval-data/unseen)
    python docs/experiments/passages-and-first-answer/hyde.py --target EMPTY/eval-data/unseen
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np

from whoqa.core.metrics import paired_book_bootstrap
from whoqa.core.words import answer_tokens
from whoqa.evaluation.unseen import other_questions
from whoqa.retrieval.bm25f import RetrievalConfig, windows
from whoqa.retrieval.passages import PassageConfig, rrf
from whoqa.service.answers import Service
from whoqa.service.schema import ServiceConfig

from pool_recall import KS, THRESHOLD, first_bearing  # (this folder's: the recall criterion)

HERE = Path(__file__).parent
INSTRUCTION = ("Write one sentence, as the novel itself might say it, that answers this question about the novel. "
               "Use the names the question uses. Question: {q}")


def read_rows(path: Path) -> dict[int, dict]:
    if not path.exists():
        return {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return {r["question_id"]: r for r in map(json.loads, f)}


def hypotheses(svc: Service, questions: list[dict], path: Path, max_new_tokens: int = 48) -> dict[int, dict]:
    """The reader's hypothetical answer sentence per question, from the question alone (kept in `path`)."""
    done = read_rows(path)
    todo = [q for q in questions if q["question_id"] not in done]
    if not todo:
        return done
    llm = svc.models.routes().llm
    base, cfg = svc.models.answering_llm(llm)
    reader = svc.models.llm(base, scores=False, cfg=cfg)
    t0 = time.perf_counter()
    for i, q in enumerate(todo, 1):
        t = time.perf_counter()
        ids = reader.tokenizer.apply_chat_template(
            [{"role": "user", "content": INSTRUCTION.format(q=q["question"])}], add_generation_prompt=True,
            tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        text = reader.backend.generate(ids, max_new_tokens, reader.stop, reader.pad, reader.tokenizer).strip()
        done[q["question_id"]] = {"question_id": q["question_id"], "book": q["document_id"], "question": q["question"],
                                  "hypothesis": text, "seconds": round(time.perf_counter() - t, 2), "llm": llm}
        with gzip.open(path, "at", encoding="utf-8") as f:  # (one gzip member a line: a cut run keeps what it wrote)
            f.write(json.dumps(done[q["question_id"]]) + "\n")
        if i % 10 == 0:
            print(f"{i}/{len(todo)} hypotheses, {time.perf_counter() - t0:.0f}s", flush=True)
    return done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=Path, required=True, help="the unseen books' prepared folder (eval-data/unseen)")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--limit", type=int, default=None, help="the first N questions only (a resumable part)")
    a = ap.parse_args()
    questions = other_questions(a.target)[:a.limit]
    svc = Service(a.target, ServiceConfig())
    hyp = hypotheses(svc, questions, a.out / "hyde_hypotheses.jsonl.gz")
    cfg, rcfg = PassageConfig(), RetrievalConfig()
    arms = ["served (pool, the question)", "hyde (pool, the question + the hypothesis)", "hyde + served (rrf)"]
    rows, texts_by_book = [], {}
    for q in questions:
        ob = svc.open(q["document_id"])
        texts = texts_by_book.setdefault(ob.id, {})
        golds = [answer_tokens(q["answer1"]), answer_tokens(q["answer2"])]
        served = ob.passages(ob.query(q["question"]), cfg)
        hy = ob.passages(ob.query(f'{q["question"]} {hyp[q["question_id"]]["hypothesis"]}'), cfg)
        # each window's middle sentence stands for its hit: the two rankings fused, windows made again
        both = rrf([(int(x + y) // 2, s) for x, y, s in served], [(int(x + y) // 2, s) for x, y, s in hy],
                   k=cfg.rrf_k)
        fused = windows(both, rcfg.context_sentences, len(ob.book.sentences), rcfg.window)
        rows.append({"question_id": q["question_id"], "book": ob.id,
                     "rank": {arm: first_bearing(ob.book, w, golds, texts)
                              for arm, w in zip(arms, (served, hy, fused))}})
    keys = [f"recall@{k}" for k in KS]

    def hits(arm):
        return [[100.0 * (r["rank"][arm] is not None and r["rank"][arm] <= k) for k in KS] for r in rows]
    table = {arm: dict(zip(keys, (round(float(np.mean(c)), 1) for c in np.array(hits(arm)).T))) for arm in arms}
    paired = {arm: paired_book_bootstrap(hits(arm), hits(arms[0]), [r["book"] for r in rows], keys)["difference"]
              for arm in arms[1:]}
    secs = [h["seconds"] for h in hyp.values()]
    summary = {"criterion": f"a window with a span of ROUGE-L >= {THRESHOLD} against a gold answer",
               "questions": len(rows), "books": len({r["book"] for r in rows}), "recall": table,
               f"minus {arms[0]}, resampled by book": paired,
               "hypothesis seconds p50": sorted(secs)[len(secs) // 2], "instruction": INSTRUCTION}
    (a.out / "hyde_recall.json").write_text(json.dumps(summary, indent=1) + "\n")
    with gzip.open(a.out / "hyde_recall.jsonl.gz", "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
