"""The anonymous-slot network's training: pretraining on the artificial Who questions of a workspace's books (a
held-out book's left out), fine-tuning on real Who questions, and book-level cross-validation, where every question
is answered by models that never saw its book, its artificial questions included."""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from whoqa.core.aliases import AliasIndex
from whoqa.core.artifacts import forget_checksum, load_binary, read_json, record_checksum
from whoqa.core.book import Book
from whoqa.core.files import atomic_write
from whoqa.core.folds import who_book_folds
from whoqa.core.metrics import ranking_metrics
from whoqa.core.numerics import intra_op_threads
from whoqa.core.device import resolve_device
from whoqa.core.progress import bar as progress_bar
from whoqa.core.query import Query
from whoqa.core.seed import SEED, set_seed
from whoqa.core.runs import file_digest, files_digest, provenance
from whoqa.core.store import fingerprint, load_vectors, load_who_set, read_artificial, read_state
from whoqa.core.registry import positive, require
from whoqa.core.workspace import Workspace
from whoqa.memnet.config import PretrainConfig, TrainConfig
from whoqa.memnet.data import question_tokens
from whoqa.memnet.model import nll
from whoqa.memnet.slots import (SlotBook, SlotConfig, SlotExample, SlotMemNet, WordVocab, collate, slot_book,
                                split_question)
from whoqa.retrieval.contexts import load_contexts, question_context

log = logging.getLogger(__name__)


@dataclass
class SlotPretrainConfig:
    """Pretraining's settings: the memory network's (`PretrainConfig`) where they mean the same, declared there."""
    epochs: int = PretrainConfig.epochs
    fraction: float = PretrainConfig.fraction  # share of the artificial questions used
    lr: float = PretrainConfig.lr
    batch_size: int = PretrainConfig.batch_size  # (each batch one book's: `book_batches`)
    memories: int = PretrainConfig.memories  # the 20 sentences up to the source sentence (the paper's pretraining)
    hops: int = SlotConfig.hops
    slots: int = SlotConfig.slots
    seed: int = SEED
    device: str = "auto"  # auto | cpu | cuda[:N] (whoqa.core.device)
    threads: int = 1  # torch intra-op threads: results depend on them (whoqa.core.numerics); more threads than
    # free cores slow these small products ten-fold

    def __post_init__(self):
        positive(self, "epochs", "lr", "batch_size", "memories", "hops", "slots", "threads")
        require(self, "fraction", 0 < self.fraction <= 1, "above 0 and at most 1")


@dataclass
class SlotTuneConfig:
    """Fine-tuning's settings: the memory network's (`TrainConfig`) where they mean the same, declared there."""
    epochs: int = 30  # half the paper's 60: fine-tuning moved nothing measurable (pretrained alone scores the same)
    lr: float = TrainConfig.lr
    decay: float = TrainConfig.decay
    decay_every: int = TrainConfig.decay_every
    batch_size: int = TrainConfig.batch_size
    memories: int = TrainConfig.memories  # the question's BM25F context (top 20 windows of 5)
    output_lr: float = TrainConfig.salience_lr  # the output layer's feature weights learn at their own rate
    trials: int = 3
    seed: int = SEED
    device: str = "auto"
    threads: int = 1

    def __post_init__(self):
        positive(self, "lr", "decay", "decay_every", "batch_size", "memories", "output_lr", "trials", "threads")
        require(self, "epochs", self.epochs >= 0, "0 (the pretrained network as it is) or more")


def load_books(workspace: Path, book_ids: list[str], vocab: WordVocab, progress: bool = True) -> dict[str, SlotBook]:
    """The books' slot arrays (a book that cannot be read is left out, with its reason logged)."""
    ws, out = Workspace(workspace), {}
    for b in progress_bar(book_ids, desc="books", unit="book", progress=progress):
        try:
            out[b] = slot_book(Book.load(ws.books / b, b), vocab).with_word_sums(vocab.matrix)
        except Exception as e:
            log.error("book %s left out: %s", b, e)
    return out


def artificial_examples(workspace: Path, books: dict[str, SlotBook], vocab: WordVocab, fraction: float,
                        seed: int) -> list[SlotExample]:
    """The artificial Who questions of these books (a seeded `fraction` of them)."""
    rng, out = np.random.default_rng(seed), []
    for b in sorted(books):
        path = Workspace(workspace).artificial_questions(b)
        if not path.is_file():
            continue
        for q in read_artificial(path):
            if (fraction < 1.0 and rng.random() >= fraction) or books[b].local(q["a"]) is None:
                continue
            out.append(artificial_example(b, q, books[b], vocab))
    return out


def artificial_example(book_id: str, q: dict, book: SlotBook, vocab: WordVocab) -> SlotExample:
    """One artificial question (a row of `data_prep.artificial.generate`): its memories the sentences up to its
    source sentence, nearest first."""
    words, named = split_question(q["q"], book, vocab)
    lo, hi = q["c"]
    return SlotExample(book_id, words, named, list(range(hi, lo - 1, -1)), [q["a"]], f"{book_id}:{q['s']}")


def who_examples(workspace: Path, books: dict[str, SlotBook], vocab: WordVocab, memories: int,
                 ranker: str = "bm25f") -> list[SlotExample]:
    """The real Who questions whose book has contexts and whose answer is one of its characters."""
    ws = Workspace(workspace)
    characters, questions = load_who_set(ws)
    out, aliases, contexts = [], {}, {}
    for q in questions:
        b = q["document_id"]
        if b not in contexts:
            contexts[b] = load_contexts(ws, ranker, b)
            aliases[b] = AliasIndex.from_records(characters.get(b, []))
        if contexts[b] is None or b not in books or not any(books[b].local(a) is not None for a in q["answers"]):
            continue
        words, named = split_question(question_tokens(Query.read(q["question"]).about(aliases[b]), b), books[b], vocab)
        out.append(SlotExample(b, words, named, question_context(contexts[b], q["question_id"], memories),
                               [int(a) for a in q["answers"]], int(q["question_id"])))
    return out


def book_batches(examples: list[SlotExample], batch_size: int, rng: random.Random) -> list[list[SlotExample]]:
    """Batches of one book each (shuffled within the book, then the batches shuffled): a batch's output layer is
    its book's characters alone, not padded to the largest cast among 64 books."""
    by_book: dict[str, list[SlotExample]] = {}
    for e in examples:
        by_book.setdefault(e.book, []).append(e)
    batches = []
    for b in sorted(by_book):
        rows = by_book[b][:]
        rng.shuffle(rows)
        batches += [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    rng.shuffle(batches)
    return batches


def fit(model: SlotMemNet, examples: list[SlotExample], books: dict[str, SlotBook], memories: int, epochs: int,
        lr: float, batch_size: int, seed: int, decay: float = 1.0, decay_every: int = 1,
        progress: bool = False, one_book: bool = False, output_lr: float | None = None) -> list[float]:
    """Adam on the NLL of the right characters, slots drawn afresh for every example of every epoch; batches of one
    book each with `one_book` (`book_batches`: pretraining's many books), else of any books. The output layer's
    feature weights learn at their own rate (`output_lr`, default lr): a few scalars that must reach the logits' scale
    in a few hundred steps."""
    out = [p for n, p in model.named_parameters() if p.requires_grad and n == "output_w"]
    params = [p for n, p in model.named_parameters() if p.requires_grad and n != "output_w"]
    opt = torch.optim.Adam([{"params": params}, {"params": out, "lr": output_lr or lr}], lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=decay_every, gamma=decay)
    shuffle, rng = random.Random(seed), np.random.default_rng(seed)
    device, history = model.C.weight.device, []
    model.train()
    for epoch in range(epochs):
        total = 0.0
        if one_book:
            batches = book_batches(examples, batch_size, shuffle)
        else:
            order = list(range(len(examples)))
            shuffle.shuffle(order)
            batches = [[examples[j] for j in order[i:i + batch_size]] for i in range(0, len(order), batch_size)]
        for batch in progress_bar(batches, desc=f"epoch {epoch + 1}", unit="batch", progress=progress):
            b = collate(batch, books, memories, model.cfg.slots, rng).to(device)
            loss = nll(model(b), b.correct)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss is {float(loss)} at epoch {epoch + 1}: lower the learning rate")
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
        sched.step()
        history.append(total / max(len(examples), 1))
    model.eval()
    return history


@torch.no_grad()
def predict(model: SlotMemNet, examples: list[SlotExample], books: dict[str, SlotBook], memories: int,
            batch_size: int = 64) -> list[dict[int, float]]:
    """Each question's log-probability per character id of its book (slots in order of first mention)."""
    model.eval()
    out = []
    for i in range(0, len(examples), batch_size):
        batch = examples[i:i + batch_size]
        host = collate(batch, books, memories, model.cfg.slots)
        logp = torch.log_softmax(model(host.to(model.C.weight.device)), -1).cpu()  # (B, C), back beside the ids
        for chars, lp in zip(host.cand_chars, logp):
            keep = chars >= 0
            out.append(dict(zip(chars[keep].tolist(), lp[keep].tolist())))
    return out


def save(models: list[SlotMemNet], folder: Path, vocab: WordVocab, record: dict) -> None:
    """folder/model.pt (the first model, its word vectors with it), members/trial<t>.pt (the others' own weights),
    words.json and config.json (the record, written last: a folder without it is not a model)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").unlink(missing_ok=True)
    atomic_write(folder / "words.json", json.dumps(vocab.words))
    for t, model in enumerate(models):
        state = model.state_dict()
        path = folder / "model.pt" if t == 0 else folder / "members" / f"trial{t}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state if t == 0 else {k: v for k, v in state.items() if k != "words.weight"},
                   path.with_suffix(".tmp"))
        forget_checksum(path)
        path.with_suffix(".tmp").replace(path)
        record_checksum(path)  # (`whoqa check` verifies it, `load` names the file when it fails)
    atomic_write(folder / "config.json", json.dumps({"slot": asdict(models[0].cfg), "members": len(models), **record},
                                                   indent=1))


def load(folder: Path, device: str = "auto") -> tuple[list[SlotMemNet], WordVocab]:
    """The models of a folder `save` wrote (one, or an ensemble's members) on `device`, and their word vocabulary."""
    folder, device = Path(folder), resolve_device(device)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} holds no slot network: make it with `whoqa slots pretrain` or `whoqa slots "
                                f"train --final`")
    repair = f"make it again (`whoqa slots pretrain` or `whoqa slots train --final`), or move {folder} aside"
    record = read_json(folder / "config.json", repair, dict)
    first = load_binary(folder / "model.pt", lambda p: torch.load(p, map_location=device, weights_only=True), repair)
    vocab = WordVocab(read_json(folder / "words.json", repair, list), first["words.weight"].cpu())
    models = []
    for t in range(record.get("members", 1)):
        state = first if t == 0 else {**load_binary(folder / "members" / f"trial{t}.pt", lambda p: torch.load(
            p, map_location=device, weights_only=True), repair), "words.weight": first["words.weight"]}
        model = SlotMemNet(vocab.matrix, SlotConfig(**record["slot"])).to(device)
        model.load_state_dict(state)
        models.append(model.eval())
    return models, vocab


def pretrain(workspace: Path, out: Path, cfg: SlotPretrainConfig, exclude: set[str] = frozenset(),
             progress: bool = True) -> dict:
    """Pretrain on the artificial questions of the workspace's books but `exclude` -> out/ (model, its words)."""
    with intra_op_threads(cfg.threads):
        return _pretrain(workspace, out, cfg, exclude, progress)


def _pretrain(workspace: Path, out: Path, cfg: SlotPretrainConfig, exclude: set[str], progress: bool) -> dict:
    ws = Workspace(workspace)
    set_seed(cfg.seed)
    vocab = WordVocab.from_keyed_vectors(load_vectors(ws))
    ids = sorted(p.name[:-len(".jsonl.gz")] for p in ws.artificial.glob("*.jsonl.gz"))
    ids = [b for b in ids if b not in exclude and (ws.books / b).is_dir()]
    books = load_books(ws, ids, vocab, progress)
    examples = artificial_examples(ws, books, vocab, cfg.fraction, cfg.seed)
    model = SlotMemNet(vocab.matrix, SlotConfig(hops=cfg.hops, slots=cfg.slots)).to(resolve_device(cfg.device))
    t0 = time.perf_counter()
    losses = fit(model, examples, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, cfg.seed,
                 progress=progress, one_book=True)
    seconds = time.perf_counter() - t0
    record = {"pretrain": asdict(cfg), "books": sorted(books), "questions": len(examples), "losses": losses,
              "seconds": round(seconds, 1), "excluded": sorted(exclude),
              **provenance(asdict(cfg), {"vectors": read_state(ws).get("lineage"), "artificial": files_digest(
                  [ws.artificial_questions(b) for b in sorted(books)])})}
    save([model], out, vocab, record)
    return record


def book_cv(workspace: Path, pretrained: Path | None, cfg: SlotTuneConfig, folds: int = 10, fold_seed: int = SEED,
            progress: bool = True, out: Path | None = None) -> dict:
    with intra_op_threads(cfg.threads):
        return _book_cv(workspace, pretrained, cfg, folds, fold_seed, progress, out)


def _book_cv(workspace: Path, pretrained: Path, cfg: SlotTuneConfig, folds: int, fold_seed: int, progress: bool,
             out: Path | None) -> dict:
    """Book-level CV on the workspace's Who questions: per book fold, `cfg.trials` models fine-tuned (from
    `pretrained`, or from scratch with its words) on the other folds' questions; each held-out question's
    log-probabilities averaged over the trials. Returns {question_id: {"book", "answers", "logp": {char: lp}}} and
    the metrics."""
    _, vocab = load(pretrained)
    ws = Workspace(workspace)
    characters, _ = load_who_set(ws)
    books = load_books(ws, sorted(characters), vocab, progress)
    examples = who_examples(ws, books, vocab, cfg.memories)
    groups = who_book_folds({e.book for e in examples}, folds, fold_seed)
    result = {}
    for k, group in enumerate(progress_bar(groups, desc="book folds", unit="fold", progress=progress)):
        test = [e for e in examples if e.book in set(group)]
        train = [e for e in examples if e.book not in set(group)]
        summed: list[dict[int, float]] = [{} for _ in test]
        for t in range(cfg.trials):
            seed = cfg.seed + 1000 * t + k
            set_seed(seed)
            model = load(pretrained, cfg.device)[0][0]
            fit(model, train, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, seed, cfg.decay,
                cfg.decay_every, output_lr=cfg.output_lr)
            for acc, lp in zip(summed, predict(model, test, books, cfg.memories)):
                for c, v in lp.items():
                    acc[c] = acc.get(c, 0.0) + v / cfg.trials
        for e, lp in zip(test, summed):
            result[str(e.qid)] = {"book": e.book, "fold": k, "answers": e.answers, "logp": lp}
    rankings = [sorted(r["logp"], key=lambda c: -r["logp"][c]) for r in result.values()]
    metrics = ranking_metrics(rankings, [r["answers"] for r in result.values()])
    if out is not None:
        atomic_write(out, json.dumps({**provenance(asdict(cfg), {"who_set": fingerprint(ws), "pretrained": file_digest(
            Path(pretrained) / "config.json"), "folds": folds, "fold_seed": fold_seed}), "metrics": metrics,
            "questions": result}))
    return {"metrics": metrics, "questions": result}


def final(workspace: Path, pretrained: Path, out: Path, cfg: SlotTuneConfig, progress: bool = True) -> dict:
    """`cfg.trials` models fine-tuned from `pretrained` on every usable Who question of the workspace (seeded as
    cross-validation's trials) -> out/: the ensemble `whoqa ask` scores with."""
    with intra_op_threads(cfg.threads):
        _, vocab = load(pretrained)
        ws = Workspace(workspace)
        characters, _ = load_who_set(ws)
        books = load_books(ws, sorted(characters), vocab, progress)
        examples = who_examples(ws, books, vocab, cfg.memories)
        if not examples:
            raise ValueError(f"{ws} has no usable Who question: run `whoqa prepare` and `whoqa index` first")
        models, losses = [], []
        for t in progress_bar(range(cfg.trials), desc="slot network, final", unit="model", progress=progress):
            seed = cfg.seed + 1000 * t
            set_seed(seed)
            model = load(pretrained, cfg.device)[0][0]
            losses.append(fit(model, examples, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, seed,
                              cfg.decay, cfg.decay_every, output_lr=cfg.output_lr)[-1])
            models.append(model)
        record = {"tune": asdict(cfg), "pretrained": str(pretrained), "questions": len(examples),
                  "books": sorted(books), "final_losses": losses,
                  **provenance(asdict(cfg), {"who_set": fingerprint(ws), "pretrained": file_digest(
                      Path(pretrained) / "config.json")})}
        save(models, out, vocab, record)
        return record


def ensemble_logp(models: list[SlotMemNet], examples: list[SlotExample], books: dict[str, SlotBook],
                  memories: int) -> list[dict[int, float]]:
    """Each question's log-probabilities averaged over an ensemble's members (as cross-validation averages trials)."""
    runs = [predict(m, examples, books, memories) for m in models]
    return [{c: sum(r[i][c] for r in runs) / len(runs) for c in runs[0][i]} for i in range(len(examples))]


PRETRAINED, FINAL = "slots-pretrain", "slots"  # folders under WS/models/


def cv_file(workspace: Path, folds: int = 10, fold_seed: int = SEED) -> Path:
    """Where `whoqa slots train` keeps a book-level CV's held-out scores: WS/runs/slots+by-book[+foldseed<S>]/cv.json
    (read by the feature ranker's `network` feature, `whoqa rerank --stage1 ...,network`)."""
    name = "slots+by-book" + (f"+folds{folds}" if folds != 10 else "") + (f"+foldseed{fold_seed}" if fold_seed != SEED
                                                                         else "")
    return Workspace(workspace).runs / name / "cv.json"


def held_out_scores(workspace: Path, folds: int, fold_seed: int) -> dict[str, dict]:
    """question id -> the slot network's held-out log-probabilities, from the book-level CV with these folds."""
    path = cv_file(workspace, folds, fold_seed)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the network feature needs `whoqa slots train --workspace "
                                f"{workspace} --folds {folds} --fold-seed {fold_seed}` first")
    data = read_json(path, f"run `whoqa slots train --workspace {workspace}` again", dict)
    return {q: r["logp"] for q, r in data["questions"].items()}
