"""`whoqa eval --data OTHER`: the trained memory networks judged on books they never saw.

OTHER's books are prepared in their own workspace (WS/eval-data/<name>/: books, Who set, artificial questions,
BM25F contexts), folded into WS's word vectors (existing rows never move), and every model trained with
`whoqa train --final` (WS/models/memnet*/, an ensemble) ranks their characters with the folded-in vectors, as `ask`
does, and with --adapt also after test-time adaptation (`whoqa.memnet.adapt`, label-free: the book's own artificial
questions), cached so a second run reuses it.
"""
from __future__ import annotations

import logging

import numpy as np
from dataclasses import asdict
from pathlib import Path

from whoqa.core.artifacts import read_rows
from whoqa.core.metrics import ranking_metrics, text_metrics
from whoqa.core.workspace import Workspace
from whoqa.core.executor import ExecutorConfig
from data_prep.addbook import fold_books, prepare_folder
from whoqa.retrieval.bm25f import NothingMatched
from whoqa.retrieval.contexts import build_contexts
from whoqa.retrieval.passages import PassageConfig
from whoqa.core.store import load_questions, load_who_set, read_state
from whoqa.core.questions import question_kind
import json
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import digest
from whoqa.llm.llama_cpp_python import NAMES_READ
from whoqa.llm.reader import model_fingerprint
from whoqa.service import Service, ServiceConfig, installed_llm
from whoqa.core.calibration import Item, ece, reliability, top_confidence
from whoqa.core.device import as_device
from whoqa.memnet.adapt import cached_adapt, patched
from whoqa.memnet.config import AdaptConfig
from whoqa.memnet.checkpoint import load_model, member_folders, saved_config
from whoqa.memnet.data import Vocab, who_examples
from whoqa.memnet.ensemble import ensemble_rankings
from whoqa.memnet.train import calibration_for, load_books, predict
from whoqa.core.numerics import intra_op_threads
from whoqa.reader.model import READER_FILE
from whoqa.core.files import atomic_write
from whoqa.evaluation.fulltask import MOU_TEST_ROUGE_L, _row, format_full_task
from whoqa.reader.data import Batcher, build_examples
from whoqa.reader.model import FiDReader, read_reader_record
from whoqa.reader.config import ReaderConfig
from whoqa.reader.steps import decoder_start_id
from whoqa.reader.train import predict as reader_predict
from whoqa.memnet.choose import choose_model as choose_memnet
from whoqa.reader.choose import choose_model as choose_reader

log = logging.getLogger(__name__)


def prepare_other(workspace: Path, data: str, jobs: int = 1, executor: str = "local",
                  ray_address: str | None = None) -> Path:
    """Prepare, index and fold in another folder's books (on a Ray cluster with executor "ray"); returns its
    workspace."""
    target = Workspace(workspace).eval_data / Path(data).resolve().name
    rep = prepare_folder(data, target, jobs, executor, ray_address)
    if rep.failed:
        log.warning("%d book(s) of %s failed to prepare and are left out", len(rep.failed), data)
    build_contexts(target, "bm25f", jobs, progress=False, executor=ExecutorConfig(executor, ray_address).check())
    if read_state(workspace) is not None:  # a workspace with vectors: fold the books in for its models
        books = sorted(p.name for p in (Workspace(target).books).iterdir() if p.is_dir())
        fold_books(Path(workspace), books, books_ws=target)
    return target


def served_service(workspace: Path, target: Path, llm: str | None = None, device: str = "auto",
                   passages: str = PassageConfig.fusion) -> Service:
    """The service `eval --data` judges: target's books served with the training workspace's fits and measurements
    (`fits_from`), every character of a Who answer kept (top) so its whole ranking is scored; `passages`: the
    fusion its passages are retrieved by (PassageConfig.fusion)."""
    return Service(target, ServiceConfig(device=device, llm=llm or None, top=10 ** 6,
                                         passages=PassageConfig(fusion=passages)), fits_from=workspace)


def _served_rows(svc: Service, cache: Path, questions: list[dict], row, desc: str, progress: bool,
                 keys: dict | None = None) -> list[dict]:
    """Each question's served answer, one JSON line of cache (the one writer of both kinds' per-question records):
    a row already there is kept (with keys, only where its "route_key" is the question's key now; a line cut by an
    interruption is left out: answered again), the rest answered by `svc.answer` in order and written as they come,
    so a second run is fast and an interrupted one resumes. row(q, answer, refused) makes a row; refused is the
    reason where nothing in the book matches the question (refused as `ask` refuses it: answer None)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    for r in read_rows(cache):
        if "question_id" in r and (keys is None or r.get("route_key") == keys.get(r["question_id"])):
            done[r["question_id"]] = r
    todo = [q for q in questions if q["question_id"] not in done]
    bar = progress_bar(total=len(todo), desc=desc, unit="q", progress=progress)
    with cache.open("a") as out:
        for q in todo:
            try:
                a = svc.answer(q["document_id"], q["question"])
            except NothingMatched as e:  # refused, as `ask` refuses it
                r = row(q, None, str(e))
            else:
                r = row(q, a, None)
            if keys is not None:
                r["route_key"] = keys[q["question_id"]]
            out.write(json.dumps(r) + "\n")
            out.flush()
            done[q["question_id"]] = r
            bar.update(1)
    bar.close()
    return [done[q["question_id"]] for q in questions]


def _who_row(q: dict, a, refused: str | None) -> dict:
    if refused is not None:  # no answer: a miss at confidence 0
        return {"question_id": q["question_id"], "route": "refused", "refused": refused, "reason": refused,
                "model": "", "ranking": [], "probabilities": [], "seconds": 0.0}
    return {"question_id": q["question_id"], "route": a.route, "reason": a.reason, "model": a.model,
            "ranking": [c.id for c in a.characters],
            "probabilities": [c.probability for c in a.characters], "seconds": a.seconds}


def served_results(workspace: Path, target: Path, characters: dict, questions: list[dict], llm: str | None = None,
                   device: str = "auto", progress: bool = True, svc: Service | None = None) -> dict:
    """What `whoqa ask` serves, judged on target's Who questions: each answered by `whoqa.service` (the route it
    chooses for a book no network trained on, the feature ranker fit on the training workspace's books only), its
    whole ranking scored beside the baselines (same denominator: a question whose answer is not a character counts
    as a miss), with ECE and a reliability curve. Answers are kept per question in target's served/<key>.jsonl (the
    key: the LLM's fingerprint, its scoring runtime and the fit; for a fit that reads the written answer, its passages and
    its writer's fingerprint), so a second run is fast and an interrupted one resumes."""
    svc = svc or served_service(workspace, target, llm, device)
    base = svc.models.who_llm()  # the LLM the served fit weighs (the shipped fit's 0.5B, whatever else reads)
    fit = svc.models.fit(base)
    runtime = svc.models.scoring_runtime(base) if base else None  # the service's own choice (transformers' keys stay)
    writer = svc.models.routes().llm if fit.ranker.reads_written else None  # (the written answer's reader)
    key = digest([model_fingerprint(base) if base else None, fit.ranker.__dict__]
                 + ([runtime] if runtime not in (None, "transformers") else [])
                 + ([NAMES_READ] if runtime == "llama-cpp-python" else [])
                 + ([model_fingerprint(writer), asdict(fit.ranker.written_passages() or svc.cfg.passages)]
                    if writer else []))[:16]
    cache = Workspace(target).served / f"{key}.jsonl"
    usable = [q for q in questions if characters.get(q["document_id"])]
    rows = _served_rows(svc, cache, usable, _who_row, "served answers", progress)
    ranked = [r["ranking"] for r in rows]
    names = {d: {c["id"]: c["name"] for c in cs} for d, cs in characters.items()}
    preds = [names[q["document_id"]].get(r[0], "") if r else "" for q, r in zip(usable, ranked)]
    conf = np.array([r["probabilities"][0] if r["ranking"] and r["probabilities"][0] is not None else
                     0.0 if r.get("refused") else np.nan for r in rows])
    hit = np.array([bool(r["ranking"]) and r["ranking"][0] in q["answers"] for q, r in zip(usable, rows)])
    calibrated = bool(len(conf)) and not np.isnan(conf).any()
    answered = [r for r in rows if not r.get("refused")]
    routes = sorted({r["route"] for r in answered})
    res = {"system": "served:" + "+".join(routes), "route": routes,
           "reason": answered[0]["reason"] if answered else None, "model": answered[0]["model"] if answered else None,
           "refused": len(rows) - len(answered), "fit": fit.where, "trials": 1, "questions": len(usable),
           "skipped_no_candidates": len(questions) - len(usable), "answers_cache": str(cache),
           "seconds_per_question": round(float(np.mean([r["seconds"] for r in rows])), 3) if rows else 0.0,
           "ece": ece(conf, hit) if calibrated else None,
           "calibration": {"ece": ece(conf, hit), "reliability": reliability(conf, hit), "questions": len(rows)}
           if calibrated else None}
    res.update({k: v for k, v in ranking_metrics(ranked, [q["answers"] for q in usable]).items() if k != "n"})
    res.update({f"{k}_std": 0.0 for k in ("p@1", "p@5", "mrr")})
    res["text"] = text_metrics(preds, [[q["answer1"], q["answer2"]] for q in usable]) if usable else {"n": 0}
    res["answers"] = {str(q["question_id"]): a for q, a in zip(usable, preds)}
    return {res["system"]: res}


def other_questions(target: Path, per_book: int | None = None) -> list[dict]:
    """Target's questions that are not Who questions (`question_kind`: what the service sends to a reader, not to a
    character ranking), in book order; with per_book, each book's first ones only (the file's order)."""
    return [q for _, qs in sorted(load_questions(target).items())
            for q in [q for q in qs if not question_kind(q["question"]).who][:per_book]]


def _route_key(svc: Service, route, base: str | None) -> str:
    """What a non-Who answer rests on besides the question: its route (with the measurements its reason names), the
    weights that answer by it (the LLM's fingerprint, the weights and runtime it answers with here, its examples'
    pool; the final FiD readers' files), the device, and how passages are retrieved and answers grounded. A cached answer is reused only under the same key."""
    weights = None
    if route.name == "llm" and base:
        model, cfg = svc.models.answering_llm(base, route.options)  # (its requantised weights, where they answer here)
        weights = [model_fingerprint(base), Path(model).name, cfg.runtime, digest(svc.models.pool(who=False).rows)]
    elif route.name == "reader":
        root = svc.models.home.reader_models
        weights = [(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                   for p in sorted(root.glob("*/final/*")) if p.is_file()]
    return digest([route.name, route.model, route.options, route.reason, weights, svc.cfg.device,
                   asdict(svc.cfg.passages), asdict(svc.cfg.grounding)])[:16]


def _other_row(q: dict, a, refused: str | None) -> dict:
    row = {"question_id": q["question_id"], "book": q["document_id"], "word": question_kind(q["question"]).word}
    if refused is not None:  # no answer: counted as not answered
        return {**row, "route": "refused", "refused": refused, "reason": refused, "model": "", "answer": None,
                "found": False, "support": None, "withheld": None, "seconds": 0.0}
    if a.kind == "who":  # a question asking for a person ("Which knight ...?"): `ask` answers the top character
        top = a.characters[0].name if a.characters else None
        return {**row, "route": a.route, "reason": a.reason, "model": a.model, "answer": top, "found": top is not None,
                "support": None, "withheld": None, "seconds": a.seconds}
    return {**row, "route": a.route, "reason": a.reason, "model": a.model, "answer": a.answer, "found": bool(a.found),
            "support": a.support, "withheld": a.withheld, "seconds": a.seconds}


def served_other_results(workspace: Path, target: Path, questions: list[dict], llm: str | None = None,
                         device: str = "auto", progress: bool = True, svc: Service | None = None) -> dict:
    """What `whoqa ask` serves, judged on target's non-Who questions: each answered by `whoqa.service` as `ask`
    answers it (the reader or LLM its routing table chooses, never a reader of no passage for a book it did not train
    on; the answer shown only where a passage sentence holds it, else "not found"), scored against both reference
    answers with ROUGE-L, METEOR and BLEU-1 (whoqa.core.metrics.text_metrics) over every question (one not answered
    scores as an empty answer) and over the answered ones only, with their coverage ("answer_coverage": the share
    answered, neither "not found" nor refused): `other_scores`. Answers are kept per question in target's
    served/other-<key>.jsonl beside the Who ones, each with the key of its route (`_route_key`): a second run answers
    again only what its route changed. {} without such questions; a result marked "unavailable" where no reader can
    serve them (as `ask` says)."""
    if not questions:
        return {}
    svc = svc or served_service(workspace, target, llm, device)
    base = installed_llm(llm)
    try:
        keys = {q["question_id"]: _route_key(svc, svc.route(q["document_id"], q["question"]), base) for q in questions}
    except FileNotFoundError as e:  # no reader of any kind: `ask` refuses every such question with this line
        log.warning("non-Who questions not judged: %s", e)
        return {"served-other": {"system": "served-other", "questions": len(questions), "unavailable": str(e)}}
    cache = Workspace(target).served / f"other-{digest([model_fingerprint(base) if base else None])[:16]}.jsonl"
    rows = _served_rows(svc, cache, questions, _other_row, "served answers (non-Who)", progress, keys)
    routes = sorted({r["route"] for r in rows if r["route"] != "refused"})
    res = {"system": "served-other:" + "+".join(routes), "route": routes,
           "reason": next((r["reason"] for r in rows if r["route"] != "refused"), None),
           "model": next((r["model"] for r in rows if r["route"] != "refused"), None),
           "books": len({q["document_id"] for q in questions}), "answers_cache": str(cache),
           "seconds_per_question": round(float(np.mean([r["seconds"] for r in rows])), 3)}
    res.update(other_scores(rows, [[q["answer1"], q["answer2"]] for q in questions]))
    res["answers"] = {str(q["question_id"]): r["answer"] if r["found"] else None for q, r in zip(questions, rows)}
    return {res["system"]: res}


def other_scores(rows: list[dict], refs: list[list[str]]) -> dict:
    """The scores of served non-Who answers (rows as `_other_row`'s, refs each question's reference answers): how
    many were answered (found: a passage sentence holds the answer) and their share ("answer_coverage", %), how many
    were withheld as not found or refused; text metrics over every question ("text": one not answered scores as an
    empty answer) and over the answered ones ("text_answered")."""
    answered = [i for i, r in enumerate(rows) if r["found"]]
    return {"questions": len(rows), "answered": len(answered),
            "answer_coverage": 100 * len(answered) / len(rows) if rows else 0.0,
            "not_found": sum(1 for r in rows if r["route"] != "refused" and not r["found"]),
            "refused": sum(1 for r in rows if r["route"] == "refused"),
            "routes": {k: sum(1 for r in rows if r["route"] == k) for k in sorted({r["route"] for r in rows})},
            "text": text_metrics([r["answer"] if r["found"] else "" for r in rows], refs) if rows else {"n": 0},
            "text_answered": text_metrics([rows[i]["answer"] for i in answered], [refs[i] for i in answered])
            if answered else {"n": 0}}


def format_other(results: dict) -> str:
    """The non-Who questions' table: coverage, and ROUGE-L / METEOR / BLEU-1 over every question (not answered:
    an empty answer) and over the answered ones."""
    lines = []
    for name, r in results.items():
        if r.get("unavailable"):
            lines.append(f"Non-Who questions: {r['questions']}, not judged: {r['unavailable']}")
            continue
        t, a = r["text"], r["text_answered"]
        lines += [f"Non-Who questions, served as `ask` serves them: {r['questions']} questions, {r['books']} books "
                  f"({', '.join(f'{k} {v}' for k, v in r['routes'].items())})",
                  f"{'system':<24}{'answered':>10}{'ROUGE-L':>9}{'METEOR':>8}{'BLEU-1':>8}   over answered:"
                  f"{'ROUGE-L':>9}{'METEOR':>8}{'BLEU-1':>8}",
                  f"{name:<24}{r['answer_coverage']:>9.1f}%{t['rouge_l']:>9.2f}{t['meteor']:>8.2f}{t['bleu_1']:>8.2f}"
                  f"{'':>17}" + (f"{a['rouge_l']:>9.2f}{a['meteor']:>8.2f}{a['bleu_1']:>8.2f}" if a["n"] else
                                 f"{'-':>9}{'-':>8}{'-':>8}")]
    return "\n".join(lines)


def final_models(workspace: Path) -> list[Path]:
    """Folders of the memory networks trained with --final (WS/models/memnet*[ranker]/)."""
    return sorted(p.parent for p in Path(workspace).glob("models/memnet*/model.pt"))


def final_results(workspace: Path, target: Path, characters: dict, questions: list[dict], adapt_cfg=None,
                  device=None, adapt: bool = False) -> dict:
    """name -> result (as evaluate_system's) of every final ensemble on target's Who set (its members' calibrated
    probabilities averaged, as `ask` answers), and with adapt, after test-time adaptation too (each member's, cached
    per model and book under target's WS/adapted/). Questions the model cannot take (answer not among its
    candidates) count as misses, so the denominator is the baselines' own. "ece" is measured on these books."""
    import torch
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
        if not (Workspace(target).contexts / ranker).is_dir():
            log.warning("%s left out: no %s contexts for %s", folder.name, ranker, target)
            continue
        cal = calibration_for(workspace, folder.name, cfg)
        temperature = cal["temperature"] if cal else 1.0
        examples, _ = who_examples(target, ranker, vocab, books, memories)
        scored = {"": [], "+adapt": []}  # per member: {question id: {character: score}}
        stats = {}
        for member in member_folders(folder):
            with intra_op_threads(cfg.get("threads", 1)):  # as the model was trained: the same numbers anywhere
                model = load_model(member, vocab, device=as_device(device))
                scored[""].append(_scores(predict(model, examples, books, memories, probabilities=True), examples))
                if not adapt:
                    continue
                mine = {}
                for b in sorted({e.book for e in examples}):
                    rows, vectors, st = cached_adapt(model, member, target, b, vocab, books, adapt_cfg)
                    stats.setdefault(b, []).append({k: v for k, v in st.items() if k != "config"})
                    here = [e for e in examples if e.book == b]
                    with patched(model, rows, vectors), torch.no_grad():
                        mine.update(_scores(predict(model, here, books, memories, probabilities=True), here))
                scored["+adapt"].append(mine)
        for suffix, members in scored.items():
            if not members:
                continue
            items = [Item(e.qid, 0, np.array(sorted(members[0][e.qid]), dtype=np.int64),
                          np.array([[m[e.qid][c] for c in sorted(members[0][e.qid])] for m in members]),
                          np.isin(sorted(members[0][e.qid]), e.answers)) for e in examples]
            rankings = dict(zip([e.qid for e in examples], ensemble_rankings(items, [temperature] * len(items))))
            conf, hit = top_confidence(items, [temperature] * len(items))
            ranked = [rankings.get(q["question_id"], []) for q in usable]
            res = {"system": f"final:{folder.name}{suffix}", "trials": 1, "questions": len(usable),
                   "skipped_no_candidates": len(questions) - len(usable), "members": len(members),
                   "not_answerable_by_model": sum(1 for q in usable if q["question_id"] not in rankings),
                   "model": str(folder), "model_config": cfg, "vectors": vocab.record(), "calibrated_by": cal,
                   "ece": ece(conf, hit) if cal else None, "reliability": reliability(conf, hit)}
            res.update({k: v for k, v in ranking_metrics(ranked, [q["answers"] for q in usable]).items() if k != "n"})
            res.update({f"{k}_std": 0.0 for k in ("p@1", "p@5", "mrr")})
            preds = [names[q["document_id"]].get(r[0], "") if r else "" for q, r in zip(usable, ranked)]
            res["text"] = text_metrics(preds, [[q["answer1"], q["answer2"]] for q in usable]) if usable else {"n": 0}
            res["answers"] = {str(q["question_id"]): a for q, a in zip(usable, preds)}
            if suffix:
                res["adaptation"] = {"config": adapt_cfg.__dict__, "per_book": stats}
            out[res["system"]] = res
    return out


def _scores(predicted, examples) -> dict:
    """{question id: {character: score}} from predict(..., probabilities=True)."""
    rankings, _, logits = predicted
    return {e.qid: dict(zip(r, sc)) for e, r, sc in zip(examples, rankings, logits)}


def final_readers(workspace: Path) -> list[Path]:
    """Folders of the readers trained with `whoqa reader train --final` (WS/models/reader/<name>/final/)."""
    return sorted(p.parent for p in Path(workspace).glob(f"models/reader/*/final/{READER_FILE}"))


def full_task_results(workspace: Path, target: Path, who: dict, progress: bool = False, device=None) -> dict | None:
    """Every final reader on all of target's questions, and the routed system (Who-set questions to the final memory
    network with the best P@1 here, the rest to the reader) -> WS/results/full_task@<name>.{json,txt}. Readers that
    need contexts target cannot have (oracle: built from the answers; bert: a trained ranker) are left out."""
    readers = final_readers(workspace)
    if not readers:
        return None
    questions = [q for qs in load_questions(target).values() for q in qs]
    refs = {q["question_id"]: [q["answer1"], q["answer2"]] for q in questions}
    who_ids = {q["question_id"] for q in load_who_set(target)[1]}
    rows, answers = {}, {}
    for folder in readers:
        saved = (read_reader_record(folder) or {}).get("config", {})
        cfg = ReaderConfig.from_record(saved)
        if cfg.context not in ("none", "bm25f"):
            log.warning("reader %s left out: its %s passages cannot be made for unseen books", folder.parent.name,
                        cfg.context)
            continue
        reader = FiDReader.load(str(folder), device)
        batcher = Batcher(reader.tokenizer, cfg.passage_tokens, cfg.answer_tokens, strip_start=decoder_start_id(reader),
                          question_passage=cfg.question_passage)
        examples = build_examples(target, cfg.context, cfg.top_k, progress)
        preds = dict(zip([e.question_id for e in examples], reader_predict(reader, batcher, examples, cfg, None, progress)))
        name = f"final:{folder.parent.name}"
        answers[name] = preds
        rows[name] = _row(preds, refs, who_ids, {"model": str(folder), "config": asdict(cfg)})
    routing = None
    memnets = {n: r for n, r in who.items() if n.startswith("final:memnet")}
    if rows and memnets:  # chosen as `ask` chooses: by the training workspace's cross-validated runs, not these books
        reader_choice = choose_reader(workspace, contexts=("none", "bm25f"))
        memnet_choice = choose_memnet(workspace)
        base = f"final:{reader_choice.name}"
        memnet = next((m for m in (f"final:{memnet_choice.name}+adapt", f"final:{memnet_choice.name}") if m in memnets),
                      sorted(memnets)[0])  # (chosen: every final model is scored here, so this is only a guard)
        who_answers = {int(q): a for q, a in memnets[memnet]["answers"].items()}
        routed = {q: who_answers.get(q, a) for q, a in answers[base].items()}
        routing = {"reader": base, "memnet": memnet, "who_questions_to_memnet": sum(1 for q in routed if q in who_answers),
                   "chosen_by": [reader_choice.why, memnet_choice.why]}
        rows[f"routed: {memnet} + {base}"] = _row(routed, refs, who_ids, routing)
    out = {"questions": len(questions), "who_questions": len(who_ids), "rows": rows, "routing": routing,
           "mou2021_test_rouge_l": MOU_TEST_ROUGE_L, "data": str(target)}
    suffix = f"@{target.name}"
    atomic_write(Workspace(workspace).results / f"full_task{suffix}.json", json.dumps(out, indent=1))
    table = format_full_task(out).replace("readers cross-validated over book folds", "unseen books, final models")
    atomic_write(Workspace(workspace).results / f"full_task{suffix}.txt", table + "\n")
    out["table"] = table
    return out
