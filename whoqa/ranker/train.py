"""The feature ranker's training and judging (`whoqa rerank --candidates features`): its stage-1 features per
question from the stored BM25F contexts, both stages fit per book fold on the other folds' questions (the LLM's name
scores its second stage's feature), judged once per question, and the fit on every question that `ask` serves
(whoqa.ranker.fits)."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from whoqa.core.store import load_who_set
from whoqa.core.aliases import AliasIndex
from whoqa.core.book import Book
from whoqa.core.calibration import ece, ece_if_calibrated, reliability
from whoqa.core.executor import ExecutorConfig
from whoqa.core.folds import who_book_folds
from whoqa.core.metrics import book_bootstrap, rank_of_first_correct, ranking_metrics
from whoqa.core.query import Query
from whoqa.core.runs import RunName
from whoqa.core.seed import SEED
from whoqa.core.workspace import Workspace
from whoqa.ranker.config import RerankConfig
from whoqa.llm.config import model_name
from whoqa.llm.prompt import fixed_examples, who_pool
from whoqa.ranker.features import (CONTEXT_SENTENCES, FROM_BOOK, STAGE1, answer_ids, book_features, book_frequency,
                                   columns, first_written)
from whoqa.ranker.model import LLM_FEATURES, SELECT, fit, fit_ranker, select_llm_features, softmax
from whoqa.ranker.scores import NameScores, rerank_dir
from whoqa.retrieval.contexts import load_contexts, question_context


def features_run(folds: int) -> str:
    """Where a feature ranker judged on book folds of its own (no network run) is kept: WS/runs/<this>/."""
    return str(RunName("features", by_book=True, folds=folds if folds != RerankConfig.folds else None))


def book_fold_candidates(workspace: Path, folds: int, seed: int = SEED) -> list[dict]:
    """Book-level CV's questions without a trained network: each usable Who question (its book has BM25F contexts
    and its answer is one of the book's characters, as the memory network's runs ask) with its book's fold (the same
    folds a `--by-book` run draws) and its right characters."""
    ws = Workspace(workspace)
    characters, questions = load_who_set(ws)
    has_contexts = {b: load_contexts(ws, "bm25f", b) is not None for b in {q["document_id"] for q in questions}}
    usable = [q for q in questions if has_contexts[q["document_id"]]
              and set(q["answers"]) & {c["id"] for c in characters.get(q["document_id"], [])}]
    if not usable:
        raise ValueError(f"{ws} has no usable Who question: run `whoqa prepare` and `whoqa index` first")
    groups = who_book_folds({q["document_id"] for q in usable}, folds, seed)
    fold_of = {b: k for k, g in enumerate(groups) for b in g}
    return [{"question_id": int(q["question_id"]), "fold": fold_of[q["document_id"]],
             "answers": [int(c) for c in q["answers"]]} for q in usable]


def stage1_features(names: str) -> tuple[str, ...]:
    """--stage1 as the registry's feature names in its order (all of them for "all"); an unknown name is a
    ValueError."""
    if names == "all":
        return FROM_BOOK
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in STAGE1]
    if unknown or not wanted:
        raise ValueError(f"unknown --stage1 feature(s) {unknown or names!r}: use names of {', '.join(STAGE1)}")
    return tuple(f for f in STAGE1 if f in wanted)


def measured_variant(cfg: RerankConfig) -> str:
    """What sets a feature-ranker measurement apart from the served one ("" for the served one): another fold seed,
    other candidates (the cast) or other features than RerankConfig's. Its summary is
    summary+<variant>.json, never served."""
    parts = [] if cfg.fold_seed == SEED else [f"foldseed{cfg.fold_seed}"]
    if cfg.candidates == "features" and cfg.cast != RerankConfig.cast:
        parts.append("cast" if cfg.cast else "nocast")
    if cfg.candidates == "features" and stage1_features(cfg.stage1) != stage1_features(RerankConfig.stage1):
        parts.append("f-" + "-".join(stage1_features(cfg.stage1)))
    if cfg.candidates == "features" and cfg.written_first:
        parts.append("writtenfirst" + ("+writtenonly" if cfg.written_only else "")
                     + ("+writtenmix" if cfg.written_mix else ""))
    if cfg.candidates == "features" and cfg.written:  # (another file of written answers: another measurement)
        from whoqa.core.runs import file_digest
        parts.append("written-" + file_digest(Path(cfg.written))[:8])
    return "+".join(parts)


def question_features(ws: Workspace, cands: list[dict], cast: bool = True, stage1: tuple[str, ...] = STAGE1,
                      network: dict[str, dict] | None = None, written: dict[str, list[int]] | None = None) -> list[dict]:
    """Per question of a run: its candidates' ids (the book's cast, or every character with `cast=False`), stage-1
    features (C, F) from its stored BM25F context (the recipe `ask` builds afresh, read by the same `book_features`;
    only the `stage1` ones, in the registry's order) and right answers (C,) bool. `network`: question id -> the slot
    network's held-out log-probabilities {character id: value} (book-level CV), for its feature; `written`: question
    id -> the characters the reader's written answer names, in order (whoqa.ranker.written), for theirs."""
    chars, questions = load_who_set(ws)
    who = {q["question_id"]: q for q in questions}
    books: dict = {}  # book id -> (Book, its BM25F contexts, its AliasIndex)
    out = []
    for c in cands:
        q = who[c["question_id"]]
        d = q["document_id"]
        if d not in books:
            books[d] = (Book.load(ws.books / d, d), load_contexts(ws, "bm25f", d) or {},
                        AliasIndex.from_records(chars[d]))
        book, contexts, index = books[d]
        query = Query.read(q["question"]).about(index)
        context = question_context(contexts, c["question_id"], CONTEXT_SENTENCES)
        scored = (network or {}).get(str(c["question_id"])) or {}
        ids, x = book_features(book, context, query.named, query, cast, {int(k): v for k, v in scored.items()},
                               stage1, (written or {}).get(str(c["question_id"])))
        answers = answer_ids(book, c["answers"], cast)
        first = first_written(book, ids, (written or {}).get(str(c["question_id"])), cast)
        out.append({"question_id": c["question_id"], "fold": c["fold"], "ids": ids, "x": x[:, columns(stage1)],
                    "y": np.array([i in answers for i in ids]), "answers": answers,
                    "frequency": book_frequency(chars[d]), "book": d, "written_first": first})
    return out


def feature_run(workspace: Path, run: str, cands: list[dict], cfg: RerankConfig, progress: bool = True, device=None,
                executor: ExecutorConfig = ExecutorConfig()) -> dict:
    """The feature ranker judged on the folds of `cands` (a memory-network run's questions and folds, or
    `book_fold_candidates`: no network is trained), kept under WS/runs/<run>/: both stages fit on the other folds'
    questions, the LLM scoring every name some fold's first stage puts in a question's top k."""
    ws = Workspace(workspace)
    stage1 = stage1_features(cfg.stage1)
    network = None
    if "network" in stage1:  # the slot network's held-out scores on the same book folds
        from whoqa.memnet.slot_train import held_out_scores
        network = held_out_scores(ws, cfg.folds, cfg.fold_seed)
    written = None
    if set(stage1) & {"written", "written_any"} or cfg.written_first:  # the reader's written answers, linked
        from whoqa.ranker.written import load_written
        if not cfg.written:
            raise ValueError("the written features and --written-first need the reader's written answers: --written "
                             "FILE (made by `whoqa choice-rows`)")
        written = load_written(Path(cfg.written))
    rows = question_features(ws, cands[:cfg.max_eval_samples], cfg.cast, stage1, network, written)
    folds = sorted({r["fold"] for r in rows})
    xs, ys = [r["x"] for r in rows], [r["y"] for r in rows]
    train = {f: [i for i, r in enumerate(rows) if r["fold"] != f] for f in folds}
    # the first stages of every fit made: each fold's, the inner ones that choose the LLM's form without fold f and
    # fold g, and the one on all questions; the LLM scores every name any of them puts in a question's top k
    left_out = [out for out in [{f} for f in folds] + [{f, g} for f in folds for g in folds if f < g] + [set()]
                if any(r["fold"] not in out for r in rows)]
    firsts = [fit([xs[i] for i, r in enumerate(rows) if r["fold"] not in out],
                  [ys[i] for i, r in enumerate(rows) if r["fold"] not in out]) for out in left_out]
    wanted = {r["question_id"]: sorted({r["ids"][j] for w in firsts
                                        for j in np.argsort(-(r["x"] @ w), kind="stable")[:cfg.top_k]}) for r in rows}
    folder = rerank_dir(ws, run, cfg)
    folder.mkdir(parents=True, exist_ok=True)
    scores = NameScores(ws, folder, cfg, progress, device, executor)
    scores.ensure(wanted)

    def written_firsts(sub: list[dict]) -> list[int | None] | None:
        """Each question's written first candidate, for a fit that puts it first (--written-first), else None."""
        return [r["written_first"] for r in sub] if cfg.written_first else None

    def llm_of(sub):
        return lambda i, top: scores.of(sub[i]["question_id"], [sub[i]["ids"][j] for j in top])

    def chosen(sub: list[dict]) -> tuple[str, dict]:
        """The LLM's form for a fit on these questions: the configured one, or the one their own book folds choose."""
        if cfg.llm_features != SELECT:
            return cfg.llm_features, {}
        return select_llm_features([r["x"] for r in sub], [r["y"] for r in sub], [r["fold"] for r in sub],
                                   cfg.top_k, llm_of(sub), stage1)

    def judged(kind: str | None) -> dict:
        """Both stages fit per fold on the other folds' questions (the LLM's form `kind`, or chosen on those folds
        when None); every question judged once."""
        first, final, llm_only, conf, hit, fitted = [], [], [], [], [], {}
        for f in folds:
            sub = [rows[i] for i in train[f]]
            form, _ = (kind, {}) if kind else chosen(sub)
            ranker = fit_ranker([r["x"] for r in sub], [r["y"] for r in sub], cfg.top_k, llm_of(sub),
                                llm_features=form, stage1=stage1, cast=cfg.cast, written_first=written_firsts(sub),
                                written_only=cfg.written_only, written_mix=cfg.written_mix)
            fitted[str(f)] = asdict(ranker)
            for r in (r for r in rows if r["fold"] == f):
                top = ranker.first(r["x"])
                llm = scores.of(r["question_id"], [r["ids"][j] for j in top[:cfg.top_k]])
                order, probs = ranker.probabilities(r["x"], None if ranker.skips_llm(r["written_first"]) else llm,
                                                    r["written_first"])
                first.append((r, [r["ids"][j] for j in top]))
                final.append((r, [r["ids"][j] for j in order]))
                by_llm = top[:cfg.top_k][np.argsort(-np.array(llm), kind="stable")]
                llm_only.append((r, [r["ids"][j] for j in by_llm] + [r["ids"][j] for j in top[cfg.top_k:]]))
                conf.append(float(probs[0]))
                hit.append(bool(r["y"][order[0]]))
        conf_a, hit_a = np.array(conf), np.array(hit)
        metrics = {name: ranking_metrics([o for _, o in pairs], [r["answers"] for r, _ in pairs])
                   for name, pairs in (("candidates", first), ("llm_over_top_k", llm_only), ("combined", final))}
        return {**metrics, "ece": ece(conf_a, hit_a), "ece_if_calibrated": ece_if_calibrated(conf_a),
                "mean_confidence": float(conf_a.mean()), "accuracy": float(hit_a.mean()),
                "reliability": reliability(conf_a, hit_a), "fold_rankers": fitted, "final": final, "first": first}

    ablation = {kind: judged(kind) for kind in LLM_FEATURES}  # each form fixed, on the same folds (not nested)
    # what is served: each fold's own choice, or the configured form (already judged above)
    result = judged(None) if cfg.llm_features == SELECT else dict(ablation[cfg.llm_features])
    final, first_orders = result.pop("final"), result.pop("first")
    for v in ablation.values():
        v.pop("first", None)
    form, losses = chosen(rows)
    served = fit_ranker(xs, ys, cfg.top_k, llm_of(rows), source=f"run {run} of {ws}, {len(rows)} questions",
                        llm_features=form, stage1=stage1, cast=cfg.cast, written_first=written_firsts(rows),
                        written_only=cfg.written_only, written_mix=cfg.written_mix)
    served.ece = result["ece"]  # (the cross-validated figure: what a user of the served fit can expect)
    served.prompt = {"passages": cfg.passages, "prompt_tokens": cfg.prompt_tokens, "shots": cfg.shots, "weights": None,
                     "llm": model_name(cfg.base), "shot_policy": cfg.shot_policy}
    if cfg.shot_policy == "fixed":  # the shots it is served with where the workspace's own are not there
        served.prompt["examples"] = fixed_examples(who_pool(ws), SEED)
    return {"questions": len(rows), "top_k": cfg.top_k, "llm_features": cfg.llm_features, **result,
            "book_frequency": ranking_metrics([r["frequency"] for r in rows], [r["answers"] for r in rows]),
            "bootstrap_vs_book_frequency": book_bootstrap(
                [o for _, o in final], [r["frequency"] for r, _ in final], [r["answers"] for r, _ in final],
                [r["book"] for r, _ in final]),
            "llm_features_chosen": {f: v["llm_features"] for f, v in result["fold_rankers"].items()},
            "llm_features_losses": losses,
            "llm_features_fixed": {k: {m: v[m] for m in ("combined", "ece", "ece_if_calibrated", "mean_confidence",
                                                         "accuracy")} for k, v in ablation.items()},
            "ranker": asdict(served), "seconds_per_question": round(float(np.mean(
                [scores.seconds.get(r["question_id"], 0.0) / scores.calls.get(r["question_id"], 1) for r in rows])), 3),
            "rankings": {str(r["question_id"]): o for r, o in final},  # (every character: MRR beyond the top k)
            # each question's book and the rank of its first right candidate (None: not among them), first stage and
            # final: what paired comparisons over books read
            "ranks": {str(r["question_id"]): {"book": r["book"], "first": rank_of_first_correct(f, r["answers"]),
                                              "final": rank_of_first_correct(o, r["answers"])}
                      for (r, o), (_, f) in zip(final, first_orders)}}


def first_stage_folds(rows: list[dict], cols: list[int], first=None) -> list[dict]:
    """Each question of `question_features`' rows ranked by the first stage fit on the other folds' questions, with
    these feature columns: {question_id, book, confidence (its top candidate's probability), rank (of the first right
    one; None: not among them)}. `first(row)`: a candidate index put first whatever the fit says (a route of its own,
    judged beside it), or None."""
    out = []
    for f in sorted({r["fold"] for r in rows}):
        w = fit([r["x"][:, cols] for r in rows if r["fold"] != f], [r["y"] for r in rows if r["fold"] != f])
        for r in (r for r in rows if r["fold"] == f):
            s = r["x"][:, cols] @ w  # (C,)
            order = list(np.argsort(-s, kind="stable"))
            chosen = first(r) if first else None
            if chosen is not None:
                order = [chosen] + [j for j in order if j != chosen]
            out.append({"question_id": r["question_id"], "book": r["book"], "confidence": float(softmax(s)[order[0]]),
                        "rank": rank_of_first_correct([r["ids"][j] for j in order], r["answers"])})
    return out
