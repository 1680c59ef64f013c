"""`whoqa bench index`: context selection speed on a prepared book of about 100k words."""
from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from whoqa.core.book import Book
from whoqa.core.query import Query
from whoqa.core.workspace import Workspace
from whoqa.core.store import load_questions, read_artificial
from whoqa.retrieval.bert_ranker import CrossEncoder, RankerConfig, base_model_path
from whoqa.retrieval.bm25f import BM25FIndex, NothingMatched, RetrievalConfig
from whoqa.core.aliases import AliasIndex
from data_prep.addbook import add_text
from whoqa.service import Service, ServiceConfig
import resource
from whoqa.reader.data import Batcher, build_examples
from whoqa.reader.model import FiDReader
from whoqa.reader.cache import StateCache, encode_examples
from whoqa.reader.config import ReaderConfig
from whoqa.reader.steps import decoder_start_id
from whoqa.reader.train import fit, predict
from whoqa.core.distributed import world
from whoqa.llm.config import LLMConfig
from whoqa.llm.reader import LLMReader


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def run(workspace: str, queries: int = 200, bert_questions: int = 3) -> dict:
    ws = Workspace(workspace)
    books = sorted(p.name for p in (ws.books).iterdir() if (p / f"{p.name}.book").is_file())
    if not books:
        raise FileNotFoundError(f"no prepared books in {ws}/books: run `whoqa prepare` first")
    sizes = {}
    for b in books:
        n = sum(1 for _ in open(ws.book_file(b, ".tokens"), encoding="utf-8")) - 1
        sizes[b] = n
    book_id = min(books, key=lambda b: abs(sizes[b] - 120_000))  # ~100k words is ~120k tokens
    book = Book.load(ws.books / book_id, book_id)
    words = sum(1 for t in book.tokens if t.pos != "PUNCT")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        BM25FIndex.build(book, Path(tmp) / "idx")
        build = time.perf_counter() - t0
        idx = BM25FIndex(Path(tmp) / "idx", RetrievalConfig())
        texts = []
        art = ws.artificial_questions(book_id)
        if art.is_file():
            texts = [q["t"] for q in read_artificial(art)][:queries]
        texts = texts or ["Who went to the house?"] * queries
        aliases = AliasIndex(book.characters)
        idx.search(*Query.read(texts[0]).about(aliases).fields, 1000)  # warm the JVM
        lat = []
        for q in texts:
            t = time.perf_counter()
            idx.search(*Query.read(q).about(aliases).fields, 1000)
            lat.append(time.perf_counter() - t)
        sents = [" ".join(book.sentence_words(s)) for s in range(len(book.sentences))]
        ranker = CrossEncoder(base_model_path(RankerConfig()))
        ranker.score(texts[0], sents[:8])
        whole, pooled = [], []
        for q in texts[:bert_questions]:
            t = time.perf_counter()
            ranker.score(q, sents)
            whole.append(time.perf_counter() - t)
            cands = [s for s, _ in idx.search(*Query.read(q).about(aliases).fields, 200)]
            t = time.perf_counter()
            ranker.score(q, [sents[s] for s in cands])
            pooled.append(time.perf_counter() - t)
    return {
        "book": book_id, "words": words, "sentences": len(sents),
        "bm25f_index_build_s_per_100k_words": round(build * 100_000 / words, 2),
        "bm25f_query_ms_p50": round(1000 * _pct(lat, 0.5), 1), "bm25f_query_ms_p95": round(1000 * _pct(lat, 0.95), 1),
        "bm25f_queries_per_s": round(len(lat) / sum(lat), 1), "bm25f_queries": len(lat),
        "bert_whole_book_s_per_question": round(statistics.median(whole), 1),
        "bert_pool200_s_per_question": round(statistics.median(pooled), 2),
        "note": "BM25F latency includes question processing (name spotting, analysis) and fetching 1000 hits",
    }


QUESTIONS = ["Who is the hero of the story?", "Who dies at the end?", "Who does the narrator meet?",
             "Who lives in the house?", "Who helps him escape?"]


def run_ask(workspace: str, n: int = 20, route: str = "auto") -> dict:
    """Latency of `ask` (whoqa.service, the route it chooses) on the prepared book with the most questions: the first
    question (reads the book, loads the models), then the p50/p95 of later ones."""
    ws = Workspace(workspace)
    svc = Service(ws)
    by_book = load_questions(ws)
    book_id = max(by_book, key=lambda b: len(by_book[b]))
    t0 = time.perf_counter()
    ob = svc.open(book_id)
    read_s = time.perf_counter() - t0
    qs = [q["question"] for q in by_book[book_id] if ob.matches(ob.query(q["question"]))][:n]
    t0 = time.perf_counter()  # (the questions the service answers: it refuses one no sentence matches)
    first = svc.answer(book_id, qs[0], route)
    first_s = read_s + time.perf_counter() - t0
    lat = []
    for q in qs:
        t = time.perf_counter()
        svc.answer(book_id, q, route)
        lat.append(time.perf_counter() - t)
    return {"route": first.route, "model": first.model, "book": book_id,
            "first_question_s (reads the book, loads the models)": round(first_s, 2),
            "ask_ms_p50": round(1000 * _pct(lat, 0.5), 1), "ask_ms_p95": round(1000 * _pct(lat, 0.95), 1),
            "questions": len(lat), "peak_rss_mb": _peak_rss_mb()}


def run_new_book(workspace: str, text: str, route: str = "auto", llm: str | None = None,
                 questions: list[str] | None = None, n: int = 5, device: str = "auto",
                 other: str | None = None) -> dict:
    """Time to the first answer about a book the workspace has never seen (`ask --text`, the default route unless
    `route` says otherwise), split by stage: prepare the text (the book engine; artificial questions and word vectors
    where the workspace has them), then the first answer (open the book and its index, load the models, answer);
    then the p50/p95 of later questions, and the peak memory. `other`: a question that is not a Who question, timed
    after them (what its first answer adds: the book's sentence vectors, the reader of other questions loaded, the
    answer). Run it on a copy of a workspace, or the book stays in it (a second run on the same text then measures
    reuse)."""
    questions = questions or QUESTIONS
    svc = Service(workspace, ServiceConfig(device=device, llm=llm))
    t = time.perf_counter()
    parts: dict = {}
    book_id = add_text(workspace, Path(text), timings=parts)
    added = time.perf_counter() - t
    t = time.perf_counter()
    first = None
    for q in questions:  # as `ask` answers: the book and its index open while the LLM loads beside them
        try:
            first = svc.answer(book_id, q, route)
            break
        except NothingMatched:
            continue
    answered = time.perf_counter() - t
    ob = svc.open(book_id)
    questions = [q for q in questions if ob.matches(ob.query(q))]  # the service answers no other
    if first is None:
        raise ValueError(f"no benchmark question matches a word of {text}: pass questions the book can answer")
    lat = []
    for i in range(n):
        t = time.perf_counter()
        svc.answer(book_id, questions[(i + 1) % len(questions)], route)
        lat.append(time.perf_counter() - t)
    extra = {}
    if other:
        t = time.perf_counter()
        got = svc.answer(book_id, other)
        extra = {"first_other_answer_s (vectors, the reader loaded, answer)": round(time.perf_counter() - t, 2),
                 "other_route": got.route, "other_shown": bool(got.answer)}
    words = len(Path(text).read_text(encoding="utf-8", errors="replace").split())
    return {"book": book_id, "words_in_file": words, "route": first.route, "model": first.model, **extra,
            "prepare_s": round(added, 2), **parts,
            "first_answer_s (book and index open, models load, answer)": round(answered, 2),
            "time_to_first_answer_s": round(added + answered, 2),
            "calibrated": bool(first.characters) and first.characters[0].probability is not None,
            "ask_s_p50": round(_pct(lat, 0.5), 2), "ask_s_p95": round(_pct(lat, 0.95), 2), "questions": len(lat),
            "peak_rss_mb": _peak_rss_mb()}


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_reader(workspace: str, context: str = "bm25f", n: int = 32, base: str | None = None) -> dict:
    """The default reader on real examples (10 passages each): encoding, training examples/s (frozen encoder with
    cached states, in float32 and bfloat16 autocast, and the whole model), generation latency per question (greedy
    and beam 4), the same with a copy pointer, peak memory."""

    import torch
    ws = Workspace(workspace)
    examples = build_examples(ws, context, 10, progress=False)[:n]
    reader = FiDReader.load(base)
    batcher = Batcher(reader.tokenizer, 192, 32, decoder_start_id(reader))
    t0 = time.perf_counter()
    states = encode_examples(reader, batcher, examples, progress=False)
    encode = (time.perf_counter() - t0) / len(examples)
    cache = StateCache.in_memory({e.question_id: s for e, s in zip(examples, states)})
    frozen = fit(reader, batcher, examples, ReaderConfig(epochs=1), cache, progress=False)
    frozen_bf16 = fit(reader, batcher, examples, ReaderConfig(epochs=1, bf16=True), cache, progress=False)
    full = fit(reader, batcher, examples[:16], ReaderConfig(epochs=1, train_encoder=True), None, progress=False)
    out = {"context": context, "questions": len(examples), "threads": torch.get_num_threads(),
           "fused_encoder_tokens_mean": round(statistics.fmean(s.shape[0] for s in states)),
           "encode_s_per_question": round(encode, 3),
           "train_examples_per_s (frozen encoder, cached states)": frozen["examples_per_second"],
           "train_examples_per_s (frozen encoder, cached states, --bf16)": frozen_bf16["examples_per_second"],
           "train_examples_per_s (whole model)": full["examples_per_second"]}
    for copy in (False, True):
        if copy:  # the copy pointer: its own decoding loop over the mixed distribution
            reader.add_pointer()
            out["train_examples_per_s (cached states, --bf16, --copy)"] = fit(
                reader, batcher, examples, ReaderConfig(epochs=1, bf16=True), cache, progress=False)[
                "examples_per_second"]
        for beams in (1, 4):
            cfg = ReaderConfig(num_beams=beams)
            lat = []
            for e in examples[:12]:
                t = time.perf_counter()
                predict(reader, batcher, [e], cfg, None, progress=False)  # encodes the passages too
                lat.append(time.perf_counter() - t)
            out[f"generate_s_per_question (beams {beams}, with encoding{', --copy' if copy else ''})"] = round(
                statistics.median(lat), 3)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def run_processes(workspace: str, context: str = "bm25f", n: int = 32, base: str | None = None) -> dict:
    """The reader's QA training (whole model, fresh encoding: what each process then shares) and answering, in as
    many processes as torchrun started: training examples/s and answer seconds per question, for `whoqa bench
    processes` alone and under `torchrun --nproc_per_node 2`."""
    import torch
    w = world()
    examples = build_examples(Workspace(workspace), context, 10, progress=False)[:n]
    torch.manual_seed(0)
    reader = FiDReader.load(base)  # auto: each process's GPU under torchrun, else the CPU
    batcher = Batcher(reader.tokenizer, 192, 32, decoder_start_id(reader))
    cfg = ReaderConfig(epochs=1, batch_size=8, train_encoder=True, num_beams=1)
    train = fit(reader, batcher, examples, cfg, None, progress=False)
    t = time.perf_counter()
    predict(reader, batcher, examples, cfg, None, progress=False)
    answer = (time.perf_counter() - t) / len(examples)
    return {"processes": w.size, "threads_per_process": torch.get_num_threads(), "questions": len(examples),
            "train_examples_per_s (whole model, global batch 8)": train["examples_per_second"],
            "train_loss_first": round(train["loss_first"], 4),
            "answer_s_per_question (greedy, with encoding)": round(answer, 3)}


def run_llm(workspace: str, base: str, runtime: str = "auto", n: int = 8, new_tokens: int = 16) -> dict:
    """A local LLM reader on real prompts (the workspace's questions with their BM25F passages, as `reader
    llm` builds them): load time, prompt (prefill) and generation tokens/s, seconds per answer, peak memory. Run it
    once per model and runtime, each in its own process, so the peak memory is that model's."""

    import torch
    cfg = LLMConfig()
    examples = build_examples(Workspace(workspace), "bm25f", cfg.top_k, progress=False)[:n]
    t = time.perf_counter()
    reader = LLMReader(base, None, cfg.prompt_tokens, new_tokens, runtime=runtime)
    load = time.perf_counter() - t
    prompts = [reader.prompt(e.question, e.passages, (), e.starts, cfg.order)[0] for e in examples]
    runs = [reader.backend.timings(ids, new_tokens, reader.pad, reader.tokenizer) for ids in prompts]
    prefill, generate = [r["prefill_s"] for r in runs], [r["generate_tok_s"] for r in runs]
    small_batch = [r["prefill_s_batch8"] for r in runs if "prefill_s_batch8" in r]
    tokens = statistics.fmean(len(p) for p in prompts)
    return {"model": base, "runtime": reader.runtime, "threads": torch.get_num_threads(), "questions": len(prompts),
            "load_s": round(load, 1), "prompt_tokens_mean": round(tokens),
            "prompt_tokens_per_s": round(tokens / statistics.median(prefill), 1),
            "generation_tokens_per_s": round(statistics.median(generate), 1),
            "answer_s (prompt + 8 tokens)": round(statistics.median(prefill) + 8 / statistics.median(generate), 2),
            **({"prompt_tokens_per_s (n_batch 8, gpt4all's default)": round(tokens / statistics.median(small_batch),
                                                                            1)} if small_batch else {}),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BAR = re.compile(r"(.+?):\s+\d+%\|")  # tqdm's "desc:  40%|"


def whoqa_command() -> list[str]:
    """How to start the `whoqa` of this code: its own cli.py where it has one (a checkout: the console script may run
    another checkout's code, as an editable install of another clone does), else the console script beside this
    Python."""
    own = Path(__file__).resolve().parents[2] / "cli.py"
    if own.is_file():
        return [sys.executable, str(own)]
    return [str(Path(sys.executable).with_name("whoqa"))]


def run_first_answers(book: str, who: str, other: str) -> dict:
    """The first answer about a new book from an empty data folder, as a person at a terminal gets it, for a Who
    question and for one that is not (each in a folder of its own, one after the other): both runs and the ratio."""
    import tempfile
    out = {}
    for kind, question in (("who", who), ("other", other)):
        with tempfile.TemporaryDirectory(prefix="whoqa-first-") as home:
            out[kind] = run_terminal(book, question, home)
    out["other_over_who"] = round(out["other"]["answer_at_s"] / max(out["who"]["answer_at_s"], 1e-9), 2)
    return out


def run_terminal(book: str, question: str, workspace: str | None = None, args: list[str] | None = None,
                 timeout: float = 900.0) -> dict:
    """`whoqa ask BOOK QUESTION` as a person at a terminal runs it, in a pseudo-terminal (so the progress it shows
    on a terminal is shown): when the first visible character came, each stage line it showed and when, and when the
    answer was there (the process's end). Each visible line is the text between carriage returns and line ends,
    its terminal escapes removed."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import termios
    cmd = whoqa_command() + ["ask", str(book), question] + (["--workspace", workspace] if workspace else []) + \
        list(args or [])
    env = {k: v for k, v in os.environ.items() if k != "WHOQA_NO_PROGRESS"}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's size: bars draw in it
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen: list[tuple[float, str]] = []
    pending, first, since = "", None, 0.0
    try:
        while True:
            if time.perf_counter() - t0 > timeout:
                proc.kill()
                raise TimeoutError(f"`whoqa ask` gave no end within {timeout:.0f} s")
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: the process ended
                break
            if not data:
                break
            now = time.perf_counter() - t0
            text = _ESCAPES.sub("", data.decode("utf-8", "replace"))
            if first is None and text.strip():
                first = now
            # a stage line ends with "..." and no line end (the next stage's \r ends it): each line is timed when
            # its first character came, not when the next one did
            for piece in re.split(r"([\r\n])", text):
                if piece in ("\r", "\n"):
                    if pending.strip():
                        seen.append((since, pending.strip()))
                    pending = ""
                elif piece:
                    since = now if not pending else since
                    pending += piece
    finally:
        os.close(master)
    code = proc.wait()
    end = time.perf_counter() - t0
    if pending.strip():
        seen.append((since, pending.strip()))
    stages, kept = [], []
    for t, line in seen:  # a stage line ("reading the book...") or a bar ("finding the characters:  40%|####  |")
        bar = _BAR.match(line)
        if not (line.endswith("...") or bar):
            kept.append(line)
            continue
        name = bar.group(1) if bar else line[:-3]
        if not stages or stages[-1]["stage"] != name:  # a bar redrawn many times is one stage: when it first came
            stages.append({"stage": name.strip(), "at_s": round(t, 2)})
    return {"command": " ".join(cmd[len(whoqa_command()):]), "exit": code,
            "first_visible_s": round(first, 2) if first is not None else None, "stages": stages,
            "answer_at_s": round(end, 2), "output": kept[:12]}
