"""`whoqa pretrain` and `whoqa train`: the memory network on artificial questions, then on the real Who set with
k-fold cross-validation x trials. Defaults are the paper's (Angelidis et al. §4)."""
from __future__ import annotations

import json
import logging
import multiprocessing
import random
import shutil
import statistics
import time
import zipfile
from dataclasses import asdict
from pathlib import Path

import torch

from whoqa.core.store import fingerprint, load_who_set, read_state
from whoqa.core.files import atomic_write
from whoqa.core.choice import same_recipe
from whoqa.core.device import resolve_device
from whoqa.core.folds import index_folds, who_book_folds
from whoqa.core.metrics import ranking_metrics
from whoqa.core.numerics import intra_op_threads
from whoqa.core.progress import bar as progress_bar
from whoqa.core.runs import (RUN_CONFIG, RUN_SUMMARY, claim, digest, file_digest, files_digest, provenance, read_run_file,
                             runs_of_model, same_run)
from whoqa.core.seed import SEED, set_seed
from whoqa.core.workspace import Workspace
from whoqa.memnet.checkpoint import load_model, save_model, saved_config
from whoqa.memnet.choose import NOT_RECIPE
from whoqa.memnet.config import PretrainConfig, TrainConfig, effective, model_name, run_name, upgrade
from whoqa.memnet.data import (BookArrays, Example, MemoryCache, Vocab, artificial_examples, book_arrays, collate,
                               who_examples)
from whoqa.memnet.ensemble import read_fold_files, run_report
from whoqa.memnet.model import KVMemNet, MemNetConfig, nll
from whoqa.memnet.reports import FinalReport, PretrainReport, TrainReport  # noqa: F401
from whoqa.retrieval.contexts import contexts_report

log = logging.getLogger(__name__)


def load_books(workspace: Path, vocab: Vocab, book_ids: list[str], progress: bool = True) -> dict[str, BookArrays]:
    out = {}
    for b in progress_bar(book_ids, desc="memory arrays", unit="book", progress=progress):
        try:
            out[b] = book_arrays(workspace, b, vocab)
        except Exception as e:  # a bad book is left out, not fatal
            log.error("book %s left out of the memory network: %s", b, e)
    return out


def fit(model: KVMemNet, examples: list[Example], books: dict[str, BookArrays], memories: int, epochs: int,
        lr: float, batch_size: int, seed: int, decay: float = 1.0, decay_every: int = 1,
        progress: bool = False, cache: MemoryCache | None = None, salience_lr: float | None = None) -> list[float]:
    """Adam on the NLL of the correct characters; returns the mean loss of each epoch. With frozen embeddings the
    memories are encoded once (`cache`, which runs sharing the same embeddings may share too). The salience weights
    learn at their own rate (salience_lr, default lr): a handful of scalars that must grow to logits' scale."""
    sal = [p for n, p in model.named_parameters() if p.requires_grad and n == "salience_w"]
    params = [p for n, p in model.named_parameters() if p.requires_grad and n != "salience_w"]
    if cache is None and not any(p.requires_grad for p in model.embed.parameters()):
        cache = MemoryCache(model, {b: books[b] for b in {e.book for e in examples}})
    groups = [{"params": params}] + ([{"params": sal, "lr": salience_lr or lr}] if sal else [])
    opt = torch.optim.Adam(groups, lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=decay_every, gamma=decay)
    rng = random.Random(seed)
    order = list(range(len(examples)))
    history = []
    device = model.C.weight.device
    model.train()
    for epoch in range(epochs):
        rng.shuffle(order)
        total, n = 0.0, 0
        steps = range(0, len(order), batch_size)
        for i in progress_bar(steps, desc=f"epoch {epoch + 1}", unit="batch", progress=progress):
            batch = [examples[j] for j in order[i:i + batch_size]]
            b = collate(batch, books, memories).to(device)
            mem = cache.batch(batch, memories) if cache is not None else None
            scores = model(b.question, b.keys, b.values, b.candidates, memories=mem, salience=b.salience,
                           roles=b.roles)  # (B, C)
            loss = nll(scores, b.correct)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss is {float(loss)} at epoch {epoch + 1}: check the inputs "
                                         f"(empty candidate sets?) or lower the learning rate")
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
            n += len(batch)
        sched.step()
        history.append(total / max(n, 1))
    model.eval()
    return history


@torch.no_grad()
def predict(model: KVMemNet, examples: list[Example], books: dict[str, BookArrays], memories: int,
            batch_size: int = 64, cache: MemoryCache | None = None, probabilities: bool = False):
    """Ranked book-local character ids per question; with probabilities, also each ranked character's probability
    (softmax over the book's characters) and its score (logit) as second and third lists."""
    model.eval()
    out, probs, logits = [], [], []
    cache = cache or MemoryCache(model, {b: books[b] for b in {e.book for e in examples}})
    for i in range(0, len(examples), batch_size):
        batch = examples[i:i + batch_size]
        host = collate(batch, books, memories)
        b = host.to(model.C.weight.device)
        scores = model(b.question, None, b.values, b.candidates, memories=cache.batch(batch, memories),
                       salience=b.salience, roles=b.roles).cpu()  # (B, C), back on the host with the ids
        p = torch.softmax(scores, -1)  # (B, C)
        order = scores.argsort(dim=-1, descending=True)  # (B, C)
        for row, o in enumerate(order):
            ranked = host.cand_chars[row][o]  # (C,)
            out.append([int(x) for x in ranked[ranked >= 0]])
            probs.append([float(x) for x in p[row][o][ranked >= 0]])
            logits.append([float(x) for x in scores[row][o][ranked >= 0]])
    return (out, probs, logits) if probabilities else out


def pretrain(workspace: Path, cfg: PretrainConfig, progress: bool = True) -> PretrainReport:
    """Pretrain on every book's artificial questions -> WS/models/<cfg.name>/. Already done when the model there has
    the same identity (config + vectors + artificial questions); otherwise it is redone, never reused."""
    with intra_op_threads(cfg.threads):
        return _pretrain(workspace, cfg, progress)


def _pretrain(workspace: Path, cfg: PretrainConfig, progress: bool = True) -> PretrainReport:
    """`pretrain`'s work, in the intra-op threads it set."""
    ws = Workspace(workspace)
    set_seed(cfg.seed)
    vocab = Vocab(ws)
    files = sorted(ws.artificial.glob("*.jsonl.gz"))
    book_ids = [p.name[:-len(".jsonl.gz")] for p in files]
    if not book_ids:
        raise FileNotFoundError(f"no artificial questions in {ws}/artificial: run `whoqa prepare` first")
    folded = {b for h in (read_state(ws) or {}).get("history", []) for b in h.get("folded_in", [])}
    if cfg.exclude or folded:  # books folded into the vectors later (ask --text, eval --data) are new books: never
        # pretrained on, and adding one leaves the pretraining what it was
        keep = set(book_ids) - set(cfg.exclude or ()) - folded
        files = [f for f, b in zip(files, book_ids) if b in keep]
        book_ids = [b for b in book_ids if b in keep]
    prov = provenance(effective(asdict(cfg)), {"vectors": vocab.identity(), "artificial": files_digest(files)})
    done = saved_config(ws.models / cfg.name)
    if (ws.models / cfg.name / "model.pt").is_file() and same_run(done, prov, upgrade):
        return PretrainReport.from_record(done["stats"], skipped=True)
    if done:
        log.warning("%s: redone, the saved model was made with another config or inputs (%s)", cfg.name,
                    ", ".join(k for k in ("config", "inputs") if done.get(k) != prov[k]) or "unrecorded")
    books = load_books(ws, vocab, book_ids, progress)
    examples = artificial_examples(ws, book_ids, vocab, books, cfg.fraction, cfg.seed)
    if cfg.max_train_samples:
        examples = examples[:cfg.max_train_samples]
    model = KVMemNet(vocab.matrix, MemNetConfig(hops=cfg.hops, train_embeddings=True, salience=cfg.salience,
                                                roles=cfg.roles)).to(resolve_device(cfg.device))
    t0 = time.perf_counter()
    losses = fit(model, examples, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, cfg.seed,
                 progress=progress, salience_lr=cfg.salience_lr)
    seconds = time.perf_counter() - t0
    report = PretrainReport(len(examples), len(books), losses, round(seconds, 1),
                            round(cfg.epochs * len(examples) / seconds, 1) if seconds else None)
    save_model(model, ws.models / cfg.name, asdict(cfg), report.record(), vocab, prov)
    return report


def new_model(vocab: Vocab, cfg: TrainConfig, workspace: Path, pretrained: str | None = None) -> KVMemNet:
    """A model to fine-tune: fresh, or (from_pretrained) WS/models/<pretrained or cfg.pretrained>."""
    device = resolve_device(cfg.device)
    if not cfg.from_pretrained:
        return KVMemNet(vocab.matrix, MemNetConfig(hops=cfg.hops, train_embeddings=False, salience=cfg.salience,
                                                   roles=cfg.roles)).to(device)
    folder = Workspace(workspace).models / (pretrained or cfg.pretrained)
    if not (folder / "model.pt").is_file():
        raise FileNotFoundError(f"{folder / 'model.pt'} is missing: run `whoqa pretrain --workspace {workspace}` first")
    model = load_model(folder, vocab, cfg.hops, device)
    if cfg.char_vectors == "word2vec":  # every book's characters as a new book's: word2vec's vectors, not tuned ones
        rows = torch.tensor(sorted(i for t, i in vocab.index.items() if t.startswith("CHAR_")), dtype=torch.long)
        model.embed.weight.data[rows.to(model.embed.weight.device)] = vocab.matrix[rows].to(model.embed.weight)
    elif cfg.char_vectors != "pretrained":
        raise ValueError(f"unknown --char-vectors {cfg.char_vectors!r}: use pretrained or word2vec")
    model.set_train_embeddings(False)
    model.extend(cfg.salience, cfg.roles)  # the run's recipe, whatever the pretrained model had
    return model


def pretrain_without(workspace: Path, cfg: TrainConfig, books: list[str], progress: bool = False) -> str:
    """Book-level CV from a pretrained model: the pretraining of cfg.pretrained redone without `books`' artificial
    questions (so a held-out book's characters keep their word2vec vectors, as a new book's do). Returns its folder
    under WS/models/ (pretrain-folds/<name>-without-<books' digest>/), reused while config and inputs are the same."""
    ws = Workspace(workspace)
    record = saved_config(ws.models / cfg.pretrained)  # its recipe; without one, the default pretraining's
    fields = {k: v for k, v in (record.get("config") or {}).items() if k in PretrainConfig.__dataclass_fields__}
    name = f"pretrain-folds/{cfg.pretrained}-without-{digest(sorted(books))[:10]}"
    pretrain(workspace, PretrainConfig(**{**fields, "name": name, "exclude": sorted(books), "device": cfg.device,
                                          "threads": cfg.threads}),
             progress=progress)
    return name


def book_groups(examples: list[Example], folds: int) -> list[list[str]]:
    """Book-level CV's folds: the books with usable Who questions in `folds` seeded groups (the same for every seed)."""
    return who_book_folds({e.book for e in examples}, folds, SEED)


def who_data(ws: Workspace, cfg: TrainConfig, progress: bool):
    """(vocab, the Who set's books, its usable questions as examples, what was skipped and why) for a run."""
    vocab = Vocab(ws)
    characters, _ = load_who_set(ws)
    books = load_books(ws, vocab, sorted(characters), progress)
    examples, skipped = who_examples(ws, cfg.ranker, vocab, books, cfg.memories)
    return vocab, books, examples, skipped


def run_inputs(workspace: Path, cfg: TrainConfig, vocab: Vocab) -> dict:
    """What a memory-network run starts from: the Who set, the vectors, the contexts' config, the pretrained model."""
    ws = Workspace(workspace)
    ctx = contexts_report(ws, cfg.ranker) or {}
    return {"who_set": fingerprint(ws), "vectors": vocab.identity(),
            "contexts": digest([ctx.get("config"), ctx.get("ranker_config")]),
            "pretrained": file_digest(ws.models / cfg.pretrained / "config.json") if cfg.from_pretrained else None}


def cross_validate(workspace: Path, cfg: TrainConfig, progress: bool = True) -> TrainReport:
    """k folds x trials; each (fold, trial) is saved as it finishes, so an interrupted run resumes."""
    with intra_op_threads(cfg.threads):
        return TrainReport(run_name(cfg), _cross_validate(workspace, cfg, progress))


def _cross_validate(workspace: Path, cfg: TrainConfig, progress: bool = True) -> dict:
    """`cross_validate`'s work, in the intra-op threads it set."""
    ws = Workspace(workspace)
    vocab, books, examples, skipped = who_data(ws, cfg, progress)
    if len(examples) < cfg.folds:
        raise ValueError(f"{len(examples)} usable Who questions for {cfg.folds} folds: run `whoqa index --ranker "
                         f"{cfg.ranker}` first, or use fewer folds")
    out = Path(cfg.runs_dir) if cfg.runs_dir else ws.runs / run_name(cfg)
    prov = provenance(effective({k: v for k, v in asdict(cfg).items() if k != "runs_dir"}), run_inputs(ws, cfg, vocab))
    redone = claim(out, prov, ws.runs_archive, upgrade)
    atomic_write(out / "config.json", json.dumps(asdict(cfg), indent=1))
    if cfg.by_book:  # the books' folds are the same for every seed: their pretrainings are shared by the seeds
        groups = book_groups(examples, cfg.folds)
        folds = [[i for i, e in enumerate(examples) if e.book in set(g)] for g in groups]
    else:
        groups = None
        folds = index_folds(len(examples), cfg.folds, cfg.seed)
    bar = progress_bar(total=cfg.folds * cfg.trials, desc=run_name(cfg), unit="run", progress=progress)
    t0 = time.perf_counter()
    done_now, cache = 0, None
    todo = [(k, t) for k in range(len(folds)) for t in range(cfg.trials) if not (out / f"fold{k}_trial{t}.json").is_file()]
    bar.update(cfg.folds * cfg.trials - len(todo))
    if cfg.jobs > 1 and groups is None and len(todo) > 1:  # every run shares the frozen memories: encode them once,
        # then hand them to worker processes; each run is seeded by its (fold, trial) alone, so its file is the one a
        # single process writes
        k, t = todo[0]
        set_seed(cfg.seed + 1000 * t + k)
        cache = MemoryCache(new_model(vocab, cfg, ws, None), {b: books[b] for b in {e.book for e in examples}})
        done_now += _in_workers(todo, (ws, cfg, vocab, books, examples, folds, out, cache), bar)
        todo = [kt for kt in todo if not (out / f"fold{kt[0]}_trial{kt[1]}.json").is_file()]  # what a dead worker left
    pretrained, fold = None, None
    for k, t in todo:
        if groups is not None and cfg.from_pretrained and k != fold:
            pretrained = pretrain_without(ws, cfg, groups[k], progress)
            cache = None  # another pretraining: other embeddings
        fold = k
        cache = _fold_run(ws, cfg, vocab, books, examples, folds, out, k, t, pretrained, cache)
        done_now += 1
        bar.update(1)
    bar.close()
    seconds = time.perf_counter() - t0
    summary = summarize(out)
    summary.update({"skipped_questions": skipped, "questions": len(examples), "seconds_this_run": round(seconds, 1),
                    "runs_this_run": done_now, "redone": redone, "provenance": prov})
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    return summary


def _in_workers(todo: list[tuple[int, int]], state: tuple, bar) -> int:
    """Run the (fold, trial)s of `todo` in cfg.jobs fresh processes (spawned, not forked: a fork of a process that
    holds threads and locks, a test runner's or a server's, can hang); returns how many finished. A worker that dies
    is one counted warning: the runs it left are done in this process, so nothing is lost."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    cfg = state[1]
    done = 0
    payload = pickle.dumps(state)  # by value, once per worker (not torch's shared-memory handles)
    try:
        with ProcessPoolExecutor(min(cfg.jobs, len(todo)), mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_worker_start, initargs=(payload,)) as pool:
            for f in as_completed([pool.submit(_worker_run, kt) for kt in todo]):
                f.result()
                done += 1
                bar.update(1)
    except BrokenProcessPool as e:
        log.warning("a training worker died (%s): the %d run(s) it left go on in this process", e, len(todo) - done)
    return done


_WORKER = None  # (ws, cfg, vocab, books, examples, folds, out, cache): what a worker of `_in_workers` was handed


def _worker_start(payload: bytes) -> None:
    import pickle
    from whoqa.core.jobs import die_with_parent
    die_with_parent()
    global _WORKER
    _WORKER = pickle.loads(payload)


def _worker_run(kt: tuple[int, int]) -> None:
    ws, cfg, vocab, books, examples, folds, out, cache = _WORKER
    with intra_op_threads(cfg.threads):
        _fold_run(ws, cfg, vocab, books, examples, folds, out, *kt, None, cache)


def _fold_run(ws: Workspace, cfg: TrainConfig, vocab: Vocab, books: dict, examples: list[Example], folds: list[list[int]],
              out: Path, k: int, t: int, pretrained, cache: MemoryCache | None) -> MemoryCache:
    """Fine-tune trial t on fold k's training questions, predict its test questions -> out/fold{k}_trial{t}.json;
    returns the memory cache it used (the frozen memories, shared by the fold's runs)."""
    test_idx = set(folds[k])
    test = [examples[i] for i in folds[k]]
    train_set = [examples[i] for i in range(len(examples)) if i not in test_idx]
    if cfg.max_train_samples:
        train_set = train_set[:cfg.max_train_samples]
    seed = cfg.seed + 1000 * t + k
    set_seed(seed)
    model = new_model(vocab, cfg, ws, pretrained)
    if cache is None:  # embeddings are frozen and the same in every run of a fold: encode the memories once
        cache = MemoryCache(model, {b: books[b] for b in {e.book for e in examples}})
    losses = fit(model, train_set, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, seed,
                 cfg.decay, cfg.decay_every, cache=cache, salience_lr=cfg.salience_lr)
    rankings, probs, logits = predict(model, test, books, cfg.memories, cache=cache, probabilities=True)
    metrics = ranking_metrics(rankings, [e.answers for e in test])
    weights = {"salience_weights": [round(w, 4) for w in model.salience_w.detach().tolist()]} if cfg.salience else {}
    atomic_write(out / f"fold{k}_trial{t}.json", json.dumps({
        "fold": k, "trial": t, "seed": seed, "metrics": metrics, "threads": torch.get_num_threads(),
        "pretrained": pretrained, "losses": losses, **weights, "predictions": [
            {"question_id": e.qid, "book": e.book, "ranking": r, "probs": [round(x, 5) for x in pr],
             "scores": [round(x, 5) for x in sc], "answers": e.answers}
            for e, r, pr, sc in zip(test, rankings, probs, logits)]}))
    return cache


def summarize(run_dir: Path) -> dict:
    """Mean and sd over folds x trials; the trials of each fold averaged (`ensemble`); calibration of both, judged on
    held-out folds (whoqa.memnet.ensemble)."""
    runs = read_fold_files(run_dir)
    out = {"runs": len(runs)}
    for key in ("p@1", "p@5", "mrr"):
        vals = [r["metrics"][key] for r in runs]
        out[key] = statistics.fmean(vals) if vals else 0.0
        out[key + "_std"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
    out.update(run_report(run_dir))
    return out


def train_final(workspace: Path, cfg: TrainConfig, progress: bool = True) -> dict:
    """An ensemble of cfg.trials models on every usable Who question (each seeded as its trial is in
    cross-validation), for `whoqa ask` and for judging other folders' books -> WS/models/<name>/ (the first member's
    model.pt, the others' members/trial<t>/model.pt). Its calibration is the one measured for the same recipe
    (`calibration_for`). Members already trained with this config and inputs are kept (resumable)."""
    with intra_op_threads(cfg.threads):
        return FinalReport(model_name(cfg), **_train_final(workspace, cfg, progress))


def _train_final(workspace: Path, cfg: TrainConfig, progress: bool = True) -> dict:
    """`train_final`'s work, in the intra-op threads it set."""
    ws = Workspace(workspace)
    vocab, books, examples, skipped = who_data(ws, cfg, progress)
    if not examples:
        raise ValueError(f"no usable Who questions: run `whoqa index --ranker {cfg.ranker}` first")
    folder = ws.models / model_name(cfg)
    final_cfg = {k: v for k, v in asdict(cfg).items() if k not in ("folds", "by_book", "runs_dir")}
    prov = provenance(effective(final_cfg), run_inputs(ws, cfg, vocab))
    losses, cache = [], None
    for t in progress_bar(range(cfg.trials), desc=f"{model_name(cfg)} final", unit="model", progress=progress):
        member = folder if t == 0 else folder / "members" / f"trial{t}"
        done = saved_config(member)
        if (member / "model.pt").is_file() and done.get("identity") == prov["identity"]:
            if zipfile.is_zipfile(member / "model.pt"):  # (torch's format: a truncated file has no zip directory)
                losses.append(done["stats"]["losses"])
                continue
            log.warning("%s is damaged: trained again", member / "model.pt")
        seed = cfg.seed + 1000 * t
        set_seed(seed)
        model = new_model(vocab, cfg, ws)
        if cache is None:
            cache = MemoryCache(model, {b: books[b] for b in {e.book for e in examples}})
        losses.append(fit(model, examples, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, seed, cfg.decay,
                          cfg.decay_every, cache=cache, salience_lr=cfg.salience_lr))
        save_model(model, member, final_cfg, {"questions": len(examples), "skipped": skipped, "losses": losses[-1],
                                              "seed": seed, "threads": torch.get_num_threads(),
                                              "trained_books": sorted({e.book for e in examples})}, vocab, prov)
    for stale in sorted((folder / "members").glob("trial*")) if (folder / "members").is_dir() else []:
        if int(stale.name[len("trial"):]) >= cfg.trials:  # an earlier, larger ensemble's members
            shutil.rmtree(stale)
    return {"questions": len(examples), "skipped": skipped, "members": cfg.trials, "losses": [l[-1] for l in losses],
            "calibration": calibration_for(ws, model_name(cfg), final_cfg)}


def calibration_for(workspace: Path, name: str, config: dict | None = None) -> dict | None:
    """The temperature a --final ensemble serves with: fit on every fold of a cross-validated run of its recipe,
    book-level runs first (new books are what it is asked about), then question-level ones; among those, the run of
    the same seed first. None without any."""
    found = []
    for run in runs_of_model(Workspace(workspace).runs, name):
        rc, summary = read_run_file(run, RUN_CONFIG), read_run_file(run, RUN_SUMMARY)
        if rc is None or summary is None:
            continue
        if model_name(TrainConfig(**{k: v for k, v in rc.items() if k in TrainConfig.__dataclass_fields__})) != name:
            continue
        if config is not None and not same_recipe(rc, config, NOT_RECIPE):
            continue
        cal = (summary.get("ensemble") or {}).get("calibration")
        if cal:
            seed = (config or {}).get("seed")
            found.append((not rc.get("by_book"), seed is not None and rc.get("seed") != seed, run.name, cal))
    if not found:
        return None
    not_by_book, _, run, cal = sorted(found, key=lambda f: f[:3])[0]
    return {"temperature": cal["temperature"], "run": run, "ece": cal["ece"], "by_book": not not_by_book}

