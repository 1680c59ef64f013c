"""`whoqa eval --data OTHER`: the trained memory networks judged on books they never saw.

OTHER's books are prepared in their own workspace (WS/eval-data/<name>/: books, Who set, artificial questions,
BM25F contexts), folded into WS's word vectors (existing rows never move), and every model trained with
`whoqa train --final` (WS/models/memnet*/) ranks their characters twice: with the folded-in vectors alone, and after
test-time adaptation (`whoqa.adapt`, label-free: the book's own artificial questions).
"""
from __future__ import annotations

import logging
from pathlib import Path

from whoqa.metrics import ranking_metrics, text_metrics

log = logging.getLogger(__name__)


def prepare_other(workspace: Path, data: str, jobs: int = 1) -> Path:
    """Prepare, index and fold in another folder's books; returns its workspace."""
    from data_prep.prepare import PrepareConfig, prepare
    from whoqa.addbook import fold_books
    from whoqa.contexts import build_contexts
    from whoqa.embeddings import read_state
    target = Path(workspace) / "eval-data" / Path(data).resolve().name
    rep = prepare(PrepareConfig(data, str(target), jobs=jobs, unlabeled=False, artificial=True, embeddings=False),
                  progress=False)
    if rep.failed:
        log.warning("%d book(s) of %s failed to prepare and are left out", len(rep.failed), data)
    build_contexts(target, "bm25f", jobs, progress=False)
    if read_state(workspace) is not None:  # a workspace with vectors: fold the books in for its models
        books = sorted(p.name for p in (target / "books").iterdir() if p.is_dir())
        fold_books(Path(workspace), books, books_ws=target)
    return target


def final_models(workspace: Path) -> list[Path]:
    """Folders of the memory networks trained with --final (WS/models/memnet*[ranker]/)."""
    return sorted(p.parent for p in Path(workspace).glob("models/memnet*/model.pt"))


def final_results(workspace: Path, target: Path, characters: dict, questions: list[dict], adapt_cfg=None) -> dict:
    """name -> result (as evaluate_system's) of every final model on target's Who set, without and with adaptation.
    Questions the model cannot take (answer not among its candidates) count as misses, so the denominator is the
    baselines' own."""
    import torch
    from whoqa.adapt import AdaptConfig, adapt, patched
    from whoqa.checkpoint import load_model, saved_config
    from whoqa.memdata import Vocab, who_examples
    from whoqa.train import load_books, predict
    folders = final_models(workspace)
    if not folders:
        return {}
    adapt_cfg = adapt_cfg or AdaptConfig()
    vocab = Vocab(workspace)
    usable = [q for q in questions if characters.get(q["document_id"])]
    names = {d: {c["id"]: c["name"] for c in cs} for d, cs in characters.items()}
    out = {}
    books = load_books(target, vocab, sorted(characters), progress=False)
    for folder in folders:
        cfg = saved_config(folder).get("config", {})
        ranker, memories = cfg.get("ranker", "bm25f"), cfg.get("memories", 100)
        if not (target / "contexts" / ranker).is_dir():
            log.warning("%s left out: no %s contexts for %s", folder.name, ranker, target)
            continue
        model = load_model(folder, vocab)
        examples, _ = who_examples(target, ranker, vocab, books, memories)
        plain = dict(zip([e.qid for e in examples], predict(model, examples, books, memories)))
        adapted, stats = {}, {}
        for b in sorted({e.book for e in examples}):
            rows, vectors, st = adapt(model, target, b, vocab, books, adapt_cfg)
            stats[b] = {k: v for k, v in st.items() if k != "config"}
            mine = [e for e in examples if e.book == b]
            with patched(model, rows, vectors), torch.no_grad():
                adapted.update(zip([e.qid for e in mine], predict(model, mine, books, memories)))
        for suffix, rankings in (("", plain), ("+adapt", adapted)):
            ranked = [rankings.get(q["question_id"], []) for q in usable]
            res = {"system": f"final:{folder.name}{suffix}", "trials": 1, "questions": len(usable),
                   "skipped_no_candidates": len(questions) - len(usable),
                   "not_answerable_by_model": sum(1 for q in usable if q["question_id"] not in rankings),
                   "model": str(folder), "model_config": cfg, "vectors": vocab.record()}
            res.update({k: v for k, v in ranking_metrics(ranked, [q["answers"] for q in usable]).items() if k != "n"})
            res.update({f"{k}_std": 0.0 for k in ("p@1", "p@5", "mrr")})
            preds = [names[q["document_id"]].get(r[0], "") if r else "" for q, r in zip(usable, ranked)]
            res["text"] = text_metrics(preds, [[q["answer1"], q["answer2"]] for q in usable]) if usable else {"n": 0}
            if suffix:
                res["adaptation"] = {"config": adapt_cfg.__dict__, "per_book": stats}
            out[res["system"]] = res
    return out
