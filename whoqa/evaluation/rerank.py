"""Who answers re-ranked by a local LLM that reads the question's passages: a second, book-independent opinion.

The memory network's cross-validated run gives each question its calibrated ensemble probabilities (its fold's
trials, the temperature fit on the other folds, `whoqa.memnet.ensemble`). Its top k characters are then scored by the
LLM: the log-likelihood of each character's name as the answer after the passages and the question
(`LLMReader.name_scores`), normalised over the k names. The two are combined as

    score(c) = log p_memnet(c) + w * log p_llm(c)        for c in the top k (the rest keep the network's order)

with the one weight w fit, for the questions of fold f, on the other folds' questions only (the mean reciprocal rank
of the right character among the k; the smallest of equal weights). A by-book run makes this the new-book measure: neither the network nor w ever saw
the judged book. The LLM's scores are kept per question and name (WS/runs/<run>/rerank@<model>+k<k>.../scores.jsonl)
and resumable.

`--candidates features` judges the feature ranker (whoqa.ranker) on the same folds instead: its
first stage picks the k names, the LLM's scores are its second stage's fourth feature; the fit it saves is what
`whoqa.service` serves (`whoqa.ranker.fits.served_fit`).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from whoqa.core.artifacts import read_rows
from whoqa.core.executor import ExecutorConfig
from whoqa.core.calibration import ece, ece_if_calibrated, probabilities, reliability
from data_prep.who_set import load_who_set
from whoqa.core.metrics import book_bootstrap, rank_of_first_correct, ranking_metrics
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import RunName, digest
from whoqa.core.seed import SEED
from whoqa.core.workspace import Workspace
from whoqa.evaluation.baselines import book_frequency
from whoqa.ranker.features import CONTEXT_SENTENCES, STAGE1, answer_ids, book_features, columns
from whoqa.ranker.fits import fit_dir, save_fit
from whoqa.ranker.model import (LLM_FEATURES, SELECT, check_llm_features, fit, fit_ranker, log_softmax,
                                select_llm_features)
from whoqa.evaluation.fulltask import who_names
from whoqa.memnet.ensemble import cross_fitted, items, read_fold_files
from whoqa.reader.config import LLMConfig, RerankConfig, model_name, passage_variant, prompt_variant, runtime_variant
from whoqa.reader.data import build_examples
from whoqa.reader.llm import LLMReader
from whoqa.reader.models import model_fingerprint
from whoqa.reader.prompt import who_pool
from whoqa.reader.remote import on_cluster
from whoqa.reader.render import WorkspacePassages, check_rendering
from whoqa.retrieval.contexts import load_contexts
from whoqa.core.folds import who_book_folds
from whoqa.core.aliases import AliasIndex
from whoqa.core.names import name_spans, named_characters
from whoqa.evaluation.evaluate import ContextView
from whoqa.ranker.fits import read_summary

# the LLM's weights tried (one number per fold: a grid is enough); 100 is the LLM's order alone, ties to the network's
WEIGHTS = np.array([0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0])


CANDIDATES = ("network", "book-frequency", "features")


def rerank_dir(workspace: Path, run: str, cfg: RerankConfig) -> Path:
    return fit_dir(workspace, run, model_name(cfg.base), cfg.top_k, cfg.candidates,
                   prompt_variant(cfg.passages, cfg.prompt_tokens, cfg.shots)
                   + passage_variant(cfg.rendering, cfg.marks, cfg.character_list) + runtime_variant(cfg.runtime))


def frequency_candidates(workspace: Path, cands: list[dict]) -> list[dict]:
    """The same questions (and folds) with book frequency's ranking instead: the book's characters by mentions, the
    probabilities their shares of the mentions."""
    chars, questions = load_who_set(workspace)
    who = {q["question_id"]: q["document_id"] for q in questions}
    out = []
    for c in cands:
        cs = chars[who[c["question_id"]]]
        count = {x["id"]: x["count"] for x in cs}
        total = sum(count.values()) or 1
        ranking = book_frequency(cs)  # the baseline's own order (ties by id)
        out.append({**c, "ranking": ranking, "probs": [count[x] / total for x in ranking]})
    return out


def network_candidates(run_dir: Path) -> list[dict]:
    """Per question of a cross-validated run: its fold, the characters by calibrated ensemble probability (best
    first), those probabilities, and the right characters."""
    runs = read_fold_files(run_dir)
    if not runs:
        raise FileNotFoundError(f"{run_dir} has no fold files: run `whoqa train --folds 10` first")
    its = items(runs)
    temps = cross_fitted(its)["fold_temperatures"]
    out = []
    for it in its:
        p = probabilities(it.scores, temps[str(it.group)])  # (C,)
        order = np.argsort(-p, kind="stable")
        out.append({"question_id": int(it.key[1]), "fold": int(it.group), "ranking": [int(it.chars[i]) for i in order],
                    "probs": [float(p[i]) for i in order], "answers": [int(c) for c in it.chars[it.correct]]})
    return out


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
        return STAGE1
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
    return "+".join(parts)


def llm_key(cfg: RerankConfig) -> str:
    """What an LLM name score depends on: the model and the prompt (not whose candidates asked for it)."""
    shown = {f: getattr(cfg, f) for f in ("rendering", "marks", "character_list")
             if getattr(cfg, f) != getattr(RerankConfig, f)}  # (raw passages keep the key they always had)
    if runtime_variant(cfg.runtime):  # (transformers' float32 scores too)
        shown["runtime"] = cfg.runtime
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
        pool = who_pool(ws)  # the shots `ask` draws for the same question (whoqa.reader.prompt)
        plain = not passage_variant(cfg.rendering, cfg.marks, cfg.character_list)
        rendered = WorkspacePassages(ws, "bm25f")
        items = []  # what one LLM call reads: (qid, candidates, question, passages, names, shots, starts, order, list)
        for qid, cs in todo.items():
            q, e = who[qid], examples.get(qid)
            d = q["document_id"]
            passages, listed = (e.passages if e else []), []
            if e and not plain:
                passages, _, listed = rendered.of(d, qid, cfg.passages, cfg.rendering, cfg.marks, cfg.character_list,
                                                  cs)
            items.append((qid, cs, q["question"], passages, [names[d][c] for c in cs],
                          pool.shots(d, q["question"], cfg.shots, SEED, qid), e.starts if e else None,
                          LLMConfig.order, listed))
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


def score_run(workspace: Path, run: str, cfg: RerankConfig, progress: bool = True, device=None,
              executor: ExecutorConfig = ExecutorConfig()) -> list[dict]:
    """The network's or book frequency's candidates of each question of the run, with the LLM's log-likelihood of
    their top-k names (`llm`, in the candidates' order)."""
    ws = Workspace(workspace)
    cands = network_candidates(ws.runs / run)[:cfg.max_eval_samples]
    if cfg.candidates == "book-frequency":
        cands = frequency_candidates(ws, cands)
    folder = rerank_dir(ws, run, cfg)
    folder.mkdir(parents=True, exist_ok=True)
    scores = NameScores(ws, folder, cfg, progress, device, executor)
    scores.ensure({c["question_id"]: c["ranking"][:cfg.top_k] for c in cands})
    return [{**c, "llm": scores.of(c["question_id"], c["ranking"][:cfg.top_k]),
             "seconds": scores.seconds.get(c["question_id"], 0.0)} for c in cands]


def combined(row: dict, w: float) -> list[int]:
    """The question's ranking with its top k reordered by log p_memnet + w * log p_llm."""
    k = len(row["llm"])
    mem = np.log(np.maximum(np.array(row["probs"][:k]), 1e-12))  # (k,)
    s = mem + w * log_softmax(np.array(row["llm"]))  # (k,)
    top = [row["ranking"][i] for i in np.argsort(-s, kind="stable")]
    return top + row["ranking"][k:]


def _mrr(rows: list[dict], w: float) -> float:
    """Mean reciprocal rank of the right character over the questions that have it in the top k (the others do not
    move)."""
    ranks = []
    for r in rows:
        k = len(r["llm"])
        if any(c in r["answers"] for c in r["ranking"][:k]):
            order = combined(r, w)
            ranks.append(1 / (1 + next(i for i, c in enumerate(order) if c in r["answers"])))
    return float(np.mean(ranks)) if ranks else 0.0


def fit_weight(rows: list[dict]) -> float:
    """The weight with the best MRR on these questions; the smallest of equals (the network's order unless the LLM
    earns a say)."""
    scores = [_mrr(rows, w) for w in WEIGHTS]
    return float(WEIGHTS[int(np.argmax(np.round(scores, 9)))])


def evaluate(rows: list[dict]) -> dict:
    """The candidates' own order (the network's or book frequency's), the LLM alone over their top k, and the two
    combined with w fit per fold on the other folds."""
    folds = sorted({r["fold"] for r in rows})
    fitted = {f: fit_weight([r for r in rows if r["fold"] != f]) for f in folds}
    answers = [r["answers"] for r in rows]
    llm_only = [[r["ranking"][i] for i in np.argsort(-np.array(r["llm"]), kind="stable")] + r["ranking"][len(r["llm"]):]
                for r in rows]
    out = {"questions": len(rows), "top_k": max(len(r["llm"]) for r in rows),
           "candidates": ranking_metrics([r["ranking"] for r in rows], answers),
           "llm_over_top_k": ranking_metrics(llm_only, answers),
           "combined": ranking_metrics([combined(r, fitted[r["fold"]]) for r in rows], answers),
           "fold_weights": {str(f): w for f, w in fitted.items()},
           "weight_on_all": fit_weight(rows),
           "seconds_per_question": round(float(np.mean([r["seconds"] for r in rows])), 3),
           "rankings": {str(r["question_id"]): combined(r, fitted[r["fold"]])[:len(r["llm"])] for r in rows}}
    return out


def question_features(ws: Workspace, cands: list[dict], cast: bool = True, stage1: tuple[str, ...] = STAGE1) -> list[dict]:
    """Per question of a run: its candidates' ids (the book's cast, or every character with `cast=False`), stage-1
    features (C, F) from its stored BM25F context (the recipe `ask` builds afresh, read by the same `book_features`;
    only the `stage1` ones, in the registry's order) and right answers (C,) bool."""
    chars, questions = load_who_set(ws)
    who = {q["question_id"]: q for q in questions}
    view = ContextView(ws, "bm25f", CONTEXT_SENTENCES)
    aliases: dict = {}
    out = []
    for c in cands:
        q = who[c["question_id"]]
        d = q["document_id"]
        index = aliases.setdefault(d, AliasIndex.from_records(chars[d]))
        named = named_characters(name_spans(q["question"], index))
        book = view.book(d)
        ids, x = book_features(book, view.sentences(d, c["question_id"]), named, q["question"], cast)
        answers = answer_ids(book, c["answers"], cast)
        out.append({"question_id": c["question_id"], "fold": c["fold"], "ids": ids, "x": x[:, columns(stage1)],
                    "y": np.array([i in answers for i in ids]), "answers": answers,
                    "frequency": book_frequency(chars[d]), "book": d})
    return out


def feature_run(workspace: Path, run: str | None, cfg: RerankConfig, progress: bool = True, device=None,
                executor: ExecutorConfig = ExecutorConfig()) -> dict:
    """The feature ranker (whoqa.ranker) judged on the run's folds, or, with no run, on book folds
    of its own (`cfg.folds`; no network is trained): both stages fit on the other folds' questions, the LLM scoring
    every name some fold's first stage puts in a question's top k."""
    ws = Workspace(workspace)
    cands = network_candidates(ws.runs / run) if run else book_fold_candidates(ws, cfg.folds, cfg.fold_seed)
    run = run or features_run(cfg.folds)
    stage1 = stage1_features(cfg.stage1)
    rows = question_features(ws, cands[:cfg.max_eval_samples], cfg.cast, stage1)
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
                                llm_features=form, stage1=stage1, cast=cfg.cast)
            fitted[str(f)] = asdict(ranker)
            for r in (r for r in rows if r["fold"] == f):
                top = ranker.first(r["x"])
                llm = scores.of(r["question_id"], [r["ids"][j] for j in top[:cfg.top_k]])
                order, probs = ranker.probabilities(r["x"], llm)
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
                        llm_features=form, stage1=stage1, cast=cfg.cast)
    served.ece = result["ece"]  # (the cross-validated figure: what a user of the served fit can expect)
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


@dataclass
class RerankReport:
    """What `whoqa rerank` measured: `record` is the re-ranking's summary.json (and its fit, for the feature ranker)."""
    record: dict

    def summary(self) -> list[str]:
        s = self.record
        lines = [f"{label:22s} P@1 {s[row]['p@1']:6.2f}  P@5 {s[row]['p@5']:6.2f}  MRR {s[row]['mrr']:.3f}"
                 for row, label in (("candidates", s["config"]["candidates"]),
                                    ("llm_over_top_k", f"LLM over its top {s['top_k']}"), ("combined", "combined"))]
        if "fold_weights" in s:
            lines.append(f"LLM weight per fold: {sorted(set(s['fold_weights'].values()))}")
        else:
            f = s["book_frequency"]
            lines += [f"book frequency         P@1 {f['p@1']:6.2f}  P@5 {f['p@5']:6.2f}  MRR {f['mrr']:.3f}",
                      f"ECE {s['ece']:.3f} (a calibrated ranker: {s['ece_if_calibrated']['mean']:.3f} on average, "
                      f"{s['ece_if_calibrated']['p95']:.3f} at the 95th percentile); LLM as "
                      f"{sorted(set(s['llm_features_chosen'].values()))} in the folds; weights fit on all "
                      f"({s['ranker']['llm_features']}): stage 1 {[round(w, 3) for w in s['ranker']['stage1']]}, "
                      f"stage 2 {[round(w, 3) for w in s['ranker']['stage2']]}"]
        return lines + [f"{s['seconds_per_question']} s/question (LLM); {s['questions']} questions"]


def rerank(workspace: Path, run: str | None, cfg: RerankConfig, progress: bool = True, device=None,
           executor: ExecutorConfig = ExecutorConfig()) -> RerankReport:
    """Score, evaluate and save (WS/runs/<run>/rerank@<model>+k<k>/summary.json, with each question's combined top
    k, which the full task's routed rows read). The feature ranker needs no run: without one it draws book folds of
    its own (WS/runs/features+by-book/)."""
    if cfg.candidates not in CANDIDATES:
        raise ValueError(f"unknown candidates {cfg.candidates!r}: use one of {', '.join(CANDIDATES)}")
    check_llm_features(cfg.llm_features, "--llm-features", select=True)  # said before minutes of LLM scoring
    check_rendering(cfg.rendering)
    stage1_features(cfg.stage1)
    executor.check()
    if cfg.fold_seed != SEED and (cfg.candidates != "features" or run):
        raise ValueError("--fold-seed draws the feature ranker's own book folds: use it with --candidates features "
                         "and no run (a run's folds are its own)")
    if cfg.candidates == "features":
        summary = {"run": run or features_run(cfg.folds), "by_book_folds": None if run else cfg.folds,
                   "config": asdict(cfg), **feature_run(workspace, run, cfg, progress, device, executor)}
        run = summary["run"]
    elif not run:
        raise ValueError(f"--candidates {cfg.candidates} re-ranks a cross-validated run: name one (WS/runs/<run>)")
    else:
        summary = {"run": run, "config": asdict(cfg), **evaluate(score_run(workspace, run, cfg, progress, device, executor))}
    # another fold seed (the spread over folds) or an ablation keeps its summary beside the served one, sharing the
    # LLM's scores
    save_fit(rerank_dir(workspace, run, cfg), summary, measured_variant(cfg) or None)
    return RerankReport(summary)


def compare(workspace: Path, a: Path, b: Path) -> dict:
    """Two re-rankings of the same questions (their summary.json or folder, e.g. raw against resolved passages) as
    paired differences: a - b in P@1 / P@5 / MRR with a 95% interval from resampling whole books, on the questions
    both judged; and each one's figures and ECE."""
    sums = []
    for p in (Path(a), Path(b)):
        s = read_summary(p.parent, p.name) if p.suffix == ".json" else read_summary(p)
        if not s or "rankings" not in s:
            raise FileNotFoundError(f"{p}: no re-ranking summary with rankings: run `whoqa rerank` first")
        sums.append(s)
    who = {q["question_id"]: q for q in load_who_set(workspace)[1]}
    common = sorted(set(sums[0]["rankings"]) & set(sums[1]["rankings"]), key=int)
    common = [q for q in common if int(q) in who]
    if not common:
        raise ValueError(f"{a} and {b} judged no question in common")
    answers = [who[int(q)]["answers"] for q in common]
    books = [who[int(q)]["document_id"] for q in common]
    ranks = [[s["rankings"][q] for q in common] for s in sums]
    return {"questions": len(common), "a": str(a), "b": str(b),
            "figures": [{**ranking_metrics(r, answers), "ece": s.get("ece")} for r, s in zip(ranks, sums)],
            "paired": book_bootstrap(ranks[0], ranks[1], answers, books)}
