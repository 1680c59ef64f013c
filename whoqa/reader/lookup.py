"""`whoqa pretrain --reader lookup`: answer lookup, the reader's second pretraining, on the artificial Who questions.

Prereading teaches the decoder to read its encoder states; the ~600 real questions of a fold are too few to also teach
it to *look an answer up* in them (it learns answer style and ignores the passages, README). The artificial Who
questions of `whoqa prepare` (dependency rules, Angelidis et al. §3.4) teach that for free, from books no question is
asked about: question = "Who had a gift for invention?", passages = the 5-sentence window of its source sentence and
distractor windows of the same book in random order, target = the answer character's name as that window spells it
(its nearest proper mention at or before the source sentence, so the answer can always be found and copied).

Artifact: WS/models/lookup/ (save_pretrained + whoqa_reader.json with the config, the prereading it started from,
training and held-out stats); `whoqa train --reader fid --lookup` starts QA training from it.
"""
from __future__ import annotations

import json
import logging
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from whoqa.book import Book, atomic_write
from whoqa.reader.data import Batcher, ReaderExample, detokenize, window_text
from whoqa.reader.model import FiDReader
from whoqa.reader.train import (_bar, checkpoint_dir, input_reliance, lookup_dir, preread_books, preread_dir,
                                pretrain_loop, resume, strip_start)
from whoqa.train import set_seed

log = logging.getLogger(__name__)


@dataclass
class LookupConfig:
    questions: int = 16000  # artificial questions trained on (once each)
    passages: int = 4  # the answer's window + 3 distractor windows of the same book
    window: int = 5  # sentences per passage (as the rankers' windows); the source sentence is the third
    passage_tokens: int = 160  # "question [SEP] passage" tokens; questions whose answer would be cut off are skipped
    answer_tokens: int = 16
    batch_size: int = 8
    lr: float = 3e-4
    preread: bool = True  # start from WS/models/preread/ (else from base)
    base: str | None = None  # as PrereadConfig.base, when not starting from the prereading
    train_encoder: bool = False
    bf16: bool = False
    books: str = "unlabeled"  # unlabeled: books no question is asked about; all: every book with artificial questions
    heldout: int = 256  # further questions (disjoint from the training ones) for held-out accuracy and input reliance
    seed: int = 13
    checkpoint_every: int = 100  # steps


def lookup_example(book: Book, q: dict, cfg: LookupConfig, rng: random.Random, qid: int) -> ReaderExample | None:
    """One artificial question as a reader example, or None when its answer has no proper mention in the window."""
    s, n = q["s"], len(book.sentences)
    first = max(0, min(s - 2, n - cfg.window))
    last = min(n - 1, first + cfg.window - 1)
    hi = book.sentences[s][1]
    names = [m for sid in range(first, s + 1) for m in book.sentence_mentions(sid)
             if m.char_id == q["a"] and m.prop == "PROP" and m.end < hi]
    if not names:
        return None
    m = names[-1]  # the proper mention nearest the source sentence
    answer = detokenize([t.word for t in book.tokens[m.start:m.end + 1]])
    passages = [window_text(book, first, last)]
    for _ in range(cfg.passages - 1):  # distractors: windows that do not overlap the answer's
        starts = [a for a in range(0, max(1, n - cfg.window + 1)) if a + cfg.window <= first or a > last]
        if not starts:
            break
        a = rng.choice(starts)
        passages.append(window_text(book, a, min(n - 1, a + cfg.window - 1)))
    rng.shuffle(passages)
    return ReaderExample(qid, book.id, q["t"], [answer], passages)


def answer_fits(tokenizer, e: ReaderExample, max_tokens: int) -> bool:
    """Whether the answer survives truncation of its "question [SEP] passage" to max_tokens."""
    p = next((p for p in e.passages if e.answers[0] in p), None)
    if p is None:
        return False
    prefix = p[:p.index(e.answers[0]) + len(e.answers[0])]
    return len(tokenizer(e.question, prefix)["input_ids"]) < max_tokens


def lookup_examples(workspace: Path, cfg: LookupConfig, tokenizer, progress: bool = True
                    ) -> tuple[list[ReaderExample], list[ReaderExample], dict]:
    """(training, held-out) examples drawn on the seed from the books' artificial questions, and counts of what was
    skipped. Held-out questions come first in the seeded draw, so changing cfg.questions keeps them."""
    from data_prep.artificial import read_questions
    ws = Path(workspace)
    books = [b for b in preread_books(ws, cfg.books) if (ws / "artificial" / f"{b}.jsonl.gz").is_file()]
    if not books:
        raise FileNotFoundError(f"no artificial questions of {cfg.books} books under {ws}/artificial: run `whoqa "
                                "prepare` first (or use --lookup-books all)")
    pool = [(b, i) for b in books for i in range(len(read_questions(ws / "artificial" / f"{b}.jsonl.gz")))]
    rng = random.Random(cfg.seed)
    picks = rng.sample(pool, min(len(pool), 5 * (cfg.questions + cfg.heldout) // 2))  # ~half are skipped
    wanted: dict[str, list[int]] = {}
    for b, i in picks:
        wanted.setdefault(b, []).append(i)
    built: dict[tuple[str, int], ReaderExample] = {}
    counts = {"books": 0, "no_proper_name": 0, "answer_cut_off": 0, "broken_books": 0}
    bar = _bar(len(wanted), "lookup questions", "book", progress)
    for b, idx in sorted(wanted.items()):
        try:
            book = Book.load(ws / "books" / b, b)
            rows = read_questions(ws / "artificial" / f"{b}.jsonl.gz")
        except Exception as err:  # one broken book is skipped, not fatal
            log.warning("answer lookup skips %s: %s", b, err)
            counts["broken_books"] += 1
            bar.update(1)
            continue
        counts["books"] += 1
        brng = random.Random(f"{cfg.seed}-{b}")
        for i in idx:
            e = lookup_example(book, rows[i], cfg, brng, len(built))
            if e is None:
                counts["no_proper_name"] += 1
            elif not answer_fits(tokenizer, e, cfg.passage_tokens):
                counts["answer_cut_off"] += 1
            else:
                built[(b, i)] = e
        bar.update(1)
    bar.close()
    ordered = [built[p] for p in picks if p in built]
    n_held = min(cfg.heldout, len(ordered) // 4)  # a small workspace keeps most of its questions for training
    held, train = ordered[:n_held], ordered[n_held:n_held + cfg.questions]
    if not train:
        raise ValueError(f"no usable artificial question for answer lookup under {ws}/artificial ({counts})")
    return train, held, counts


def start_of(workspace: Path, cfg: LookupConfig) -> tuple[str | None, dict | None]:
    """(path the lookup starts from, the prereading config it starts from)."""
    if not cfg.preread:
        return cfg.base, None
    path = preread_dir(workspace)
    if not (path / "whoqa_reader.json").is_file():
        raise FileNotFoundError(f"{path} is missing: run `whoqa pretrain --reader preread --workspace {workspace}` "
                                "first (or use --no-lookup-preread)")
    return str(path), json.loads((path / "whoqa_reader.json").read_text()).get("config")


@torch.no_grad()
def heldout_stats(reader: FiDReader, batcher: Batcher, held: list[ReaderExample], batch: int = 16) -> dict:
    """Greedy exact-match accuracy of the looked-up names and the input reliance on the held-out questions."""
    from whoqa.metrics import exact_match
    reader.model.eval()
    preds: list[str] = []
    for i in range(0, len(held), batch):
        fused, fmask = reader.encode(*batcher.inputs(held[i:i + batch]))  # (B, T, H), (B, T)
        preds += reader.generate(fused, fmask, batcher.answer_tokens, num_beams=1)
    return {"exact_match": round(sum(exact_match(p, e.answers) for p, e in zip(preds, held)) / max(1, len(held)), 2),
            **input_reliance(reader, lambda idx: reader.encode(*batcher.inputs([held[i] for i in idx])),
                             lambda idx: batcher.labels([held[i].answers[0] for i in idx]), len(held)),
            "samples": [{"question": e.question, "answer": e.answers[0], "prediction": p}
                        for e, p in zip(held[:8], preds)]}


def pretrain_lookup(workspace: Path, cfg: LookupConfig, progress: bool = True) -> dict:
    """Train the reader to answer artificial Who questions from passages -> WS/models/lookup/ (resumable)."""
    ws = Path(workspace)
    out_dir = lookup_dir(ws)
    start, preread = start_of(ws, cfg)
    meta = out_dir / "whoqa_reader.json"
    if (out_dir / "config.json").is_file() and meta.is_file():
        done = json.loads(meta.read_text())
        if done.get("config") == asdict(cfg) and done.get("preread") == preread:
            return {**done["stats"], "skipped": True}
    set_seed(cfg.seed)
    record = {**asdict(cfg), "preread_config": preread}  # a new prereading restarts an interrupted lookup
    reader, state = resume(out_dir, record, start)
    batcher = Batcher(reader.tokenizer, cfg.passage_tokens, cfg.answer_tokens, strip_start(reader))
    train, held, counts = lookup_examples(ws, cfg, reader.tokenizer, progress)

    def loss_of(idx):
        chunk = [train[i] for i in idx]
        with torch.set_grad_enabled(cfg.train_encoder):
            fused, fmask = reader.encode(*batcher.inputs(chunk))  # (B, T, H), (B, T)
        return reader.loss(fused, fmask, batcher.labels([e.answers[0] for e in chunk]))

    before = heldout_stats(reader, batcher, held[:64]) if state is None else None
    stats, losses = pretrain_loop(reader, state, out_dir, cfg, record, len(train), loss_of, "lookup", progress)
    stats = {"questions": len(train), **counts, **stats, "heldout": heldout_stats(reader, batcher, held)}
    if before is not None:
        stats["heldout_before_64"] = {k: v for k, v in before.items() if k != "samples"}
    reader.save(out_dir, {"config": asdict(cfg), "preread": preread, "stats": stats, "losses": losses})
    shutil.rmtree(checkpoint_dir(out_dir), ignore_errors=True)
    atomic_write(ws / "results" / "lookup.json", json.dumps({"config": asdict(cfg), "preread": preread,
                                                              "stats": stats}, indent=1))
    return stats
