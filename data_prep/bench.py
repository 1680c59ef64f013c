"""`whoqa bench`: throughput of the offline engine (words/s, one process and two) and peak RSS on the longest book;
one book's parse in 1 and in N processes (`whoqa bench parse`)."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time

from data_prep.narrativeqa import NarrativeQA

_ONE_BOOK = """
import json, resource, sys, time
from data_prep.engine_spacy import SpacyEngine
from data_prep.narrativeqa import NarrativeQA
e = SpacyEngine()
text = NarrativeQA(sys.argv[1]).book_text(sys.argv[2])
t = time.perf_counter(); out = e.process_text(text); dt = time.perf_counter() - t
print(json.dumps({"words": out.stats["words"], "seconds": dt, "parse_seconds": out.stats["parse_seconds"],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(data: str, n_books: int = 4, min_words: int = 20000, repeats: int = 1) -> dict:
    nqa = NarrativeQA(data)
    docs = nqa.documents()
    sizes = sorted((len(nqa.book_text(b, docs).split()), b) for b in nqa.book_ids())
    chosen = [b for w, b in sizes if w >= min_words][:n_books]
    longest_words, longest = sizes[-1]
    words = sum(w for w, b in sizes if b in chosen)

    def prepare_rate(jobs: int) -> float:
        from data_prep.prepare import PrepareConfig, prepare
        rates = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as ws:
                t = time.perf_counter()
                rep = prepare(PrepareConfig(data, ws, books=chosen, jobs=jobs), progress=False)
                rates.append(rep.words / (time.perf_counter() - t))
        return statistics.median(rates)

    one = prepare_rate(1)
    two = prepare_rate(2)
    big = json.loads(subprocess.run([sys.executable, "-c", _ONE_BOOK, data, longest], capture_output=True, text=True,
                                    check=True).stdout.strip().splitlines()[-1])
    return {
        "books": len(chosen), "words": words,
        "words_per_s_jobs1": round(one), "words_per_s_jobs2": round(two), "speedup_jobs2": round(two / one, 2),
        "longest_book": {"id": longest, "words": longest_words, "words_per_s": round(big["words"] / big["seconds"]),
                         "parse_share": round(big["parse_seconds"] / big["seconds"], 2),
                         "peak_rss_mb": round(big["peak_rss_mb"])},
        "note": "prepare end to end (text extraction, parse, coreference, writing files), process start-up included",
    }


_PARSE = """
import hashlib, json, resource, sys, time
t0 = time.perf_counter()
from pathlib import Path
from data_prep.parse_pool import parse_book
from whoqa.core.lexicon import load_nlp
from whoqa.core.text import extract_body, read_book_text
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF,
                                                                        resource.RUSAGE_CHILDREN)))
text = extract_body(read_book_text(Path(sys.argv[1])))
nlp = load_nlp()
t1, c1 = time.perf_counter(), cpu()
p = parse_book(nlp, text, processes=int(sys.argv[2]))
t2, c2 = time.perf_counter(), cpu()
print(json.dumps({"words": len(text.split()), "load_s": t1 - t0, "parse_s": t2 - t1, "parse_cpu_s": c2 - c1,
                  "parse": hashlib.sha1(repr((p.tokens, p.entities)).encode()).hexdigest()}))
"""


def parse_run(text: str, processes: list[int], repeats: int = 3) -> dict:
    """`whoqa bench parse`: one book's parse (data_prep.parse_pool) in each count of processes, every run a fresh
    Python that loads the parser and parses the book once, as a first use does; the counts take turns (1 2 1 2 ...)
    so a drifting machine moves them alike. Medians of the parse's wall and CPU seconds (every process's), and
    whether every run gave the same parse."""
    runs: dict[int, list[dict]] = {n: [] for n in processes}
    for _ in range(repeats):
        for n in processes:
            out = subprocess.run([sys.executable, "-c", _PARSE, text, str(n)], capture_output=True, text=True,
                                 check=True).stdout.strip().splitlines()[-1]
            runs[n].append(json.loads(out))
    first = runs[processes[0]][0]
    return {"text": text, "words": first["words"], "repeats": repeats,
            "same_parse": len({r["parse"] for rs in runs.values() for r in rs}) == 1,
            **{f"processes_{n}": {"parse_s": round(statistics.median(r["parse_s"] for r in rs), 2),
                                  "parse_cpu_s": round(statistics.median(r["parse_cpu_s"] for r in rs), 2),
                                  "load_s": round(statistics.median(r["load_s"] for r in rs), 2),
                                  "parse_s_runs": [round(r["parse_s"], 2) for r in rs]} for n, rs in runs.items()}}
