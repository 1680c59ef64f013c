"""`whoqa bench`: throughput of the offline engine (words/s, one process and two) and peak RSS on the longest book."""
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
