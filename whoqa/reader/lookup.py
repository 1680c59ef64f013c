"""`whoqa reader lookup`: answer lookup, the reader's second pretraining, on the artificial Who questions.

Prereading teaches the decoder to read its encoder states; the ~600 real questions of a fold are too few to also teach
it to *look an answer up* in them (it learns answer style and ignores the passages, README). The artificial Who
questions of `whoqa prepare` (dependency rules, Angelidis et al. §3.4) teach that for free, from books no question is
asked about: question = "Who had a gift for invention?", passages = the 5-sentence window of its source sentence and
distractor windows of the same book in random order, target = the answer character's name as the passages spell it
(it has a proper mention at or before the source sentence in its window, so the answer can always be found and
copied), with every character renamed at random per example so that copying is the only way to the answer.

Artifact: WS/models/lookup/ (save_pretrained + whoqa_reader.json with the config, the prereading it started from,
training and held-out stats); `whoqa reader train --lookup` starts QA training from it.
"""
from __future__ import annotations

import json
import logging
import math
import random
import re
from dataclasses import asdict
from pathlib import Path

import torch

from whoqa.core.progress import bar as progress_bar
from data_prep.span_questions import span_questions
from whoqa.core.book import Book
from whoqa.core.files import atomic_write
from whoqa.core.distributed import world
from whoqa.core.runs import digest
from whoqa.core.book import detokenize
from whoqa.reader.data import Batcher, ReaderExample
from whoqa.reader.model import READER_FILE, FiDReader, read_reader_record
from whoqa.reader.config import LookupConfig
from whoqa.reader.reports import LookupReport
from whoqa.reader.pretraining import (finish_pretraining, lookup_dir, preread_books, preread_dir, preread_record,
                                      pretrain_loop, resume)
from whoqa.reader.steps import decoder_start_id, input_reliance
from whoqa.core.seed import set_seed
from whoqa.core.workspace import Workspace
from whoqa.core.book import read_characters
from whoqa.core.store import read_artificial
from whoqa.core.metrics import exact_match

log = logging.getLogger(__name__)
_NAME = re.compile(r"[A-Z][A-Za-z'-]*\.?( [A-Z][A-Za-z'-]*\.?){0,3}")  # "Mrs. Etherege", not "Glendinning?--that"


def lookup_example(book: Book, q: dict, cfg: LookupConfig, rng: random.Random, qid: int,
                   names: list[str] | None = None) -> ReaderExample | None:
    """One artificial question as a reader example, or None when its answer has no proper mention in the window.

    A Who question's answer is the nearest proper mention of its character at or before the source sentence; a span
    question's (data_prep.span_questions) is its span. With names (cfg.rename), each character's proper mentions in the
    question, passages and answer take a random name from the list, one per character and example: the reader can then
    only answer by copying from its passages, never by recalling which names a book uses (without renaming, it
    answered unseen books with names of its training books)."""
    s, n = q["s"], len(book.sentences)
    first = max(0, min(s - 2, n - cfg.window))
    last = min(n - 1, first + cfg.window - 1)
    if "span" not in q:
        hi = book.sentences[s][1]
        near = [m for sid in range(first, s + 1) for m in book.sentence_mentions(sid)
                if m.char_id == q["a"] and m.prop == "PROP" and m.end < hi]
        if not near:
            return None
    renamed: dict[int, str] = {}

    def name_of(char_id: int, surface: str) -> str:
        if names is None:
            return surface
        if char_id not in renamed:
            pick = rng.choice(names)
            for _ in range(20):  # two characters of one example never share a name
                if pick not in renamed.values():
                    break
                pick = rng.choice(names)
            renamed[char_id] = pick
        return renamed[char_id]

    def text(lo: int, hi: int) -> str:  # tokens lo..hi, proper mentions as name_of gives them
        props = {m.start: m for sid in range(book.tokens[lo].sentence, book.tokens[hi].sentence + 1)
                 for m in book.sentence_mentions(sid) if m.prop == "PROP"}
        words: list[str] = []
        i = lo
        while i <= hi:
            m = props.get(i)
            if m is None:
                words.append(book.tokens[i].word)
                i += 1
                continue
            words.append(name_of(m.char_id, detokenize([t.word for t in book.tokens[m.start:m.end + 1]])))
            i = m.end + 1
        return detokenize(words)

    def sentences(a: int, b: int) -> str:
        return text(book.sentences[a][0], book.sentences[b][1] - 1)

    if "span" in q:
        answer = text(*q["span"])
    else:
        m = near[-1]  # the proper mention nearest the source sentence
        answer = name_of(q["a"], detokenize([t.word for t in book.tokens[m.start:m.end + 1]]))
    if names is None:
        question = q["t"]
    else:
        words = [name_of(int(t[5:]), t) if t.startswith("CHAR_") else t for t in q["q"]]
        question = detokenize(words)
        question = question[:1].upper() + question[1:]
    passages = [sentences(first, last)]
    starts = [a for a in range(0, max(1, n - cfg.window + 1)) if a + cfg.window <= first or a > last]
    for _ in range(cfg.passages - 1 if starts else 0):  # distractors: windows that do not overlap the answer's
        a = rng.choice(starts)
        passages.append(sentences(a, min(n - 1, a + cfg.window - 1)))
    rng.shuffle(passages)
    return ReaderExample(qid, book.id, question, [answer], passages)


def character_names(workspace: Path, books: list[str]) -> list[str]:
    """Every proper canonical character name of the books (renaming's pool), sorted and unique."""
    out = set()
    for b in books:
        try:
            chars = read_characters(Workspace(workspace).book_file(b, ".book"))
        except Exception:  # a broken book is reported where it is loaded
            continue
        out |= {c.name for c in chars.values() if c.aliases and c.name in c.aliases and _NAME.fullmatch(c.name)}
    return sorted(out)


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
    skipped. Held-out questions come from books never trained on (a tenth, at least one when there are two)."""
    ws = Workspace(workspace)
    books = [b for b in preread_books(ws, cfg.books) if (ws.artificial_questions(b)).is_file()]
    if not books:
        raise FileNotFoundError(f"no artificial questions of {cfg.books} books under {ws}/artificial: run `whoqa "
                                "prepare` first (or use --books all)")
    rng = random.Random(cfg.seed)
    held_books = set(rng.sample(books, max(1, len(books) // 10))) if len(books) > 1 and cfg.heldout else set()
    names = character_names(ws, books) if cfg.rename else None
    counts = {"books": 0, "heldout_books": len(held_books), "names": len(names or []), "no_proper_name": 0,
              "answer_cut_off": 0, "broken_books": 0}
    rows_of: dict[str, list[dict]] = {}
    for b in books:
        try:
            rows_of[b] = read_artificial(ws.artificial_questions(b))
        except Exception as err:  # one broken file is skipped, not fatal
            log.warning("answer lookup skips %s: %s", b, err)
            counts["broken_books"] += 1
    parts = ((held_books, cfg.heldout), (set(rows_of) - held_books, cfg.questions))
    picks, quota = [], {}
    for part, n in parts:
        n_span = round(n * cfg.spans)
        pool = [(b, i) for b in sorted(part & set(rows_of)) for i in range(len(rows_of[b]))]
        picks.append(rng.sample(pool, min(len(pool), 5 * (n - n_span) // 2)))  # ~half are skipped
        total = max(1, sum(len(rows_of[b]) for b in part & set(rows_of)))
        for b in part & set(rows_of):  # span questions: a share per book in proportion to its Who questions (~length)
            quota[b] = math.ceil(2 * n_span * len(rows_of[b]) / total) if n_span else 0
    wanted: dict[str, list[int]] = {}
    for b, i in picks[0] + picks[1]:
        wanted.setdefault(b, []).append(i)
    built: dict[tuple[str, int], ReaderExample] = {}
    spans: dict[str, list[ReaderExample]] = {}
    load = sorted(set(wanted) | {b for b, k in quota.items() if k})
    bar = progress_bar(total=len(load), desc="lookup questions", unit="book", progress=progress)
    for b in load:
        try:
            book = Book.load(ws.books / b, b)
        except Exception as err:  # one broken book is skipped, not fatal
            log.warning("answer lookup skips %s: %s", b, err)
            counts["broken_books"] += 1
            bar.update(1)
            continue
        counts["books"] += 1
        brng = random.Random(f"{cfg.seed}-{b}")

        def usable(e: ReaderExample | None) -> bool:
            if e is None:
                counts["no_proper_name"] += 1
                return False
            if not answer_fits(tokenizer, e, cfg.passage_tokens):
                counts["answer_cut_off"] += 1
                return False
            return True

        for i in wanted.get(b, []):
            e = lookup_example(book, rows_of[b][i], cfg, brng, len(built), names)
            if usable(e):
                built[(b, i)] = e
        if quota.get(b):
            rows, _ = span_questions(book)
            for j in brng.sample(range(len(rows)), min(len(rows), quota[b])):
                e = lookup_example(book, rows[j], cfg, brng, -1, names)
                if usable(e):
                    spans.setdefault(b, []).append(e)
        bar.update(1)
    bar.close()
    out = []
    for (part, n), who_picks in zip(parts, picks):
        n_span = round(n * cfg.spans)
        chosen = [built[p] for p in who_picks if p in built][:n - n_span]
        if n_span:
            pool = [e for b in sorted(part & set(spans)) for e in spans[b]]
            chosen += rng.sample(pool, min(n_span, len(pool)))
            rng.shuffle(chosen)
        out.append(chosen)
    held, train = out
    for k, e in enumerate(held + train):  # ids in the order of use
        e.question_id = k
    counts["span_questions"] = sum(1 for e in train if not e.question.lower().startswith("who"))
    if not train:
        raise ValueError(f"no usable artificial question for answer lookup under {ws}/artificial ({counts})")
    return train, held, counts


def start_of(workspace: Path, cfg: LookupConfig) -> tuple[str | None, dict | None]:
    """(path the lookup starts from, the prereading config it starts from)."""
    if not cfg.preread:
        return cfg.base, None
    path = preread_dir(workspace)
    if not (path / READER_FILE).is_file():
        raise FileNotFoundError(f"{path} is missing: run `whoqa reader preread --workspace {workspace}` "
                                "first (or use --no-preread)")
    return str(path), preread_record(workspace)


@torch.no_grad()
def heldout_stats(reader: FiDReader, batcher: Batcher, held: list[ReaderExample], batch: int = 16) -> dict:
    """Greedy exact match (%) of the looked-up names and the input reliance on the held-out questions."""
    reader.model.eval()
    preds: list[str] = []
    for i in range(0, len(held), batch):
        preds += reader.generate(reader.encode(*batcher.inputs(held[i:i + batch])), batcher.answer_tokens, num_beams=1)
    em = 100 * sum(exact_match(p, e.answers) for p, e in zip(preds, held)) / max(1, len(held))
    by_kind: dict[str, list[float]] = {}
    for p, e in zip(preds, held):
        by_kind.setdefault(re.match(r"[a-z]*", e.question.lower()).group(), []).append(exact_match(p, e.answers))
    return {"exact_match": round(em, 2),  # percent, as text_metrics
            "exact_match_by_kind": {k: round(100 * sum(v) / len(v), 2) for k, v in sorted(by_kind.items())},
            **input_reliance(reader, lambda idx: reader.encode(*batcher.inputs([held[i] for i in idx])),
                             lambda idx: batcher.labels([held[i].answers[0] for i in idx]), len(held)),
            "samples": [{"question": e.question, "answer": e.answers[0], "prediction": p}
                        for e, p in zip(held[:8], preds)]}


def pretrain_lookup(workspace: Path, cfg: LookupConfig, progress: bool = True, device=None) -> LookupReport:
    """Train the reader to answer artificial Who questions from passages -> WS/models/lookup/ (resumable), on
    device."""
    ws = Workspace(workspace)
    out_dir = lookup_dir(ws, cfg.copy)
    start, preread = start_of(ws, cfg)
    meta = out_dir / READER_FILE
    books = [b for b in preread_books(ws, cfg.books) if (ws.artificial_questions(b)).is_file()]
    inputs = {"books": digest(books)}  # books added since: redone (records made before inputs were kept: trusted)
    if (out_dir / "config.json").is_file() and meta.is_file():
        done = read_reader_record(out_dir)
        if (done.get("config") == asdict(cfg) and done.get("preread") == preread
                and done.get("inputs", inputs) == inputs):
            return LookupReport(done["stats"], cfg.copy, skipped=True)
    set_seed(cfg.seed)
    record = {**asdict(cfg), "preread_config": preread}  # a new prereading restarts an interrupted lookup
    reader, state = resume(out_dir, record, start, device)
    if cfg.copy:
        reader.add_pointer()
    batcher = Batcher(reader.tokenizer, cfg.passage_tokens, cfg.answer_tokens, decoder_start_id(reader))
    train, held, counts = lookup_examples(ws, cfg, reader.tokenizer, progress)

    def loss_of(idx, reduction="mean"):
        chunk = [train[i] for i in idx]
        with torch.set_grad_enabled(cfg.train_encoder):
            fused = reader.encode(*batcher.inputs(chunk))  # states (B, T, H)
        labels = batcher.labels([e.answers[0] for e in chunk])  # (B, A)
        loss = reader.loss(fused, labels, reduction)
        return (loss, int((labels != -100).sum())) if reduction == "sum" else loss

    before = heldout_stats(reader, batcher, held[:64]) if state is None else None
    stats, losses = pretrain_loop(reader, state, out_dir, cfg, record, len(train), loss_of, "lookup", progress)
    stats = {"questions": len(train), **counts, **stats, "heldout": heldout_stats(reader, batcher, held)}
    if before is not None:
        stats["heldout_before_64"] = {k: v for k, v in before.items() if k != "samples"}
    finish_pretraining(reader, out_dir, {"config": asdict(cfg), "preread": preread, "inputs": inputs, "stats": stats,
                                         "losses": losses})
    if world().main:
        atomic_write(ws.results / f"{out_dir.name}.json", json.dumps({"config": asdict(cfg), "preread": preread,
                                                                  "stats": stats}, indent=1))
    return LookupReport(stats, cfg.copy)
