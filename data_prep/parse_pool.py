"""One book's parse across processes (issue 54: a first answer soon after a long book is given).

Why this way: spaCy's parse is nearly all of a new book's wait, and it is one paragraph batch after another. This
process and forked copies of it (the parser already loaded: nothing is reloaded or pickled on the way in) take the
book's batches in turn from a shared counter until none is left, so a process that other work on the machine slows
down simply takes fewer; each keeps its batches' Parsed and sends them back at the end, and the batches are joined in
order, their token and sentence ids shifted. The batches are the ones a single process parses (`batch_size`
paragraphs), so every number the model computes is the one-process parse's: the same result, token for token
(tests/test_parse_pool.py). spaCy's own `nlp.pipe(n_process=N)` keeps the order too, but sends every Doc back as bytes
for this process to read (slower here), and its generator hangs when closed before its end (docs/benchmarks.md).

A batch that fails, or a process that dies (killed, out of memory), ends the whole parse with one ParseFailed line,
before any of the book's files is written (they are written from the whole parse only).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from multiprocessing.connection import wait

from data_prep.parse import Parsed, paragraphs, parse_paragraphs
from whoqa.core.jobs import die_with_parent

MIN_CHARS = 50_000  # text a process is forked for when the count is automatic (~9k words, ~2 s of parsing)
POLL_S = 0.2  # how often the other processes' progress is read while waiting for them


class ParseFailed(RuntimeError):
    """A batch of the book could not be parsed, or its process died (a RuntimeError: the CLI's one line,
    `prepare`'s failed book)."""


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def count(setting: int, paras: list[tuple[int, str]], batch_size: int) -> int:
    """The processes that parse these paragraphs: `setting`, or for 0 (auto) one per usable core with at least
    MIN_CHARS of text each; never more than the batches, and 1 where processes cannot be forked (auto: off Linux)."""
    batches = -(-len(paras) // batch_size)
    if "fork" not in mp.get_all_start_methods() or (setting == 0 and not sys.platform.startswith("linux")):
        return 1
    if setting == 0:
        setting = min(usable_cores(), sum(len(p) for _, p in paras) // MIN_CHARS)
    return max(1, min(setting, batches))


def parse_book(nlp, text: str, batch_size: int = 128, processes: int = 0, progress=None) -> Parsed:
    """data_prep.parse.parse_text's parse of a story body, in `processes` processes (0: auto, `count`)."""
    return parse_across(nlp, paragraphs(text), batch_size, processes, progress)


def parse_across(nlp, paras: list[tuple[int, str]], batch_size: int, processes: int, progress=None) -> Parsed:
    """The paragraphs parsed by `processes` processes (0: auto, `count`), joined in order: what one process gives."""
    n = count(processes, paras, batch_size)
    if n == 1:
        return parse_paragraphs(nlp, paras, 0, batch_size, progress)
    batches = [(a, min(a + batch_size, len(paras))) for a in range(0, len(paras), batch_size)]
    ctx = mp.get_context("fork")
    turn = ctx.Value("q", 0)  # the next batch to take
    done = ctx.Array("q", n, lock=False)  # tokens parsed so far by each process (slot 0: this one)
    told = [0]

    def tell(n_tokens: int = 0) -> None:
        """`progress` told of every process's tokens, this one's and the forked ones' alike."""
        done[0] += n_tokens
        now = sum(done)
        if progress is not None and now > told[0]:
            progress(now - told[0])
            told[0] = now
    children = []
    try:
        for k in range(1, n):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(nlp, paras, batches, batch_size, turn, done, k, send),
                               daemon=True, name=f"whoqa-parse-{k}")
            proc.start()
            send.close()  # this end lives in the child only, so its death reads as the end of the pipe here
            children.append((proc, recv))
        results = _take(nlp, paras, batches, batch_size, turn, tell, lambda: _check(children))
        results.update(_gather(children, tell))
    finally:
        for proc, recv in children:
            if proc.is_alive():
                proc.kill()
            proc.join()
            recv.close()
    return join([results[k] for k in range(len(batches))])


def _take(nlp, paras, batches, batch_size: int, turn, tick, waiting=None) -> dict[int, Parsed]:
    """Batches taken in turn (the shared counter `turn`) until none is left, each parsed here. `waiting`, called
    while the counter is held by another process, may raise (this process: a forked one died holding it)."""
    out = {}
    lock = turn.get_lock()
    while True:
        while not lock.acquire(timeout=1.0):
            if waiting is not None:
                waiting()
        try:
            k = turn.value
            turn.value = k + 1
        finally:
            lock.release()
        if k >= len(batches):
            return out
        a, b = batches[k]
        out[k] = parse_paragraphs(nlp, paras[a:b], a, batch_size, tick)


def _check(children) -> None:
    for k, (proc, _) in enumerate(children, 1):
        if proc.exitcode not in (None, 0):
            raise _died(k, proc.exitcode)


def _died(k: int, code) -> ParseFailed:
    return ParseFailed(f"parse process {k} died (exit code {code}: killed, or out of memory), so the book was not made")


def _gather(children, tick) -> dict[int, Parsed]:
    """Every forked process's batches as they come; one that failed or died is a ParseFailed."""
    out = {}
    waiting = {recv: (k, proc) for k, (proc, recv) in enumerate(children, 1)}
    while waiting:
        for recv in wait(list(waiting), timeout=POLL_S):
            k, proc = waiting.pop(recv)
            try:
                ok, got = recv.recv()
            except (EOFError, OSError):
                proc.join()
                raise _died(k, proc.exitcode) from None
            if not ok:
                raise ParseFailed(f"parsing the book failed in parse process {k} ({got}), so the book was not made")
            out.update(got)
        tick()
    return out


def _child(nlp, paras, batches, batch_size: int, turn, done, slot: int, send) -> None:
    """A forked process: batches taken in turn and parsed, its progress counted in `done[slot]`, their Parsed sent
    back at the end (or its error's line)."""
    die_with_parent()

    def tick(n_tokens: int) -> None:
        done[slot] += n_tokens
    try:
        result = (True, _take(nlp, paras, batches, batch_size, turn, tick))
    except Exception as e:  # told to the parent as one line
        lines = str(e).strip().splitlines()
        result = (False, f"{type(e).__name__}: {lines[0] if lines else ''}")
    send.send(result)
    send.close()


def join(parsed: list[Parsed]) -> Parsed:
    """Consecutive parts as one Parsed: each part's token ids, heads, entity spans and sentence ids shifted past
    the parts before it (paragraph ids and character offsets are already the book's)."""
    tokens, entities = [], []
    for part in parsed:
        base, sentences = len(tokens), tokens[-1].sentence + 1 if tokens else 0
        if base or sentences:
            for t in part.tokens:
                t.index += base
                t.head += base
                t.sentence += sentences
            for e in part.entities:
                e.start += base
                e.end += base
        tokens += part.tokens
        entities += part.entities
    return Parsed(tokens, entities)
