"""Issue 64, item 1's last arm at the answer level: the reader given single sentences (or other windows) instead of
5-sentence windows, within the same prompt budget or a larger one.

`window_recall.py` found single sentences hold an answer's words more often within the same words read (recall +4.58
at 300 words, 41 books); whether the 1.5B answers as well from isolated sentences (a pronoun loses its antecedent) is
measured here: every other question of the main job's 10 unseen books answered as `ask` answers it (the served
route, pool passages, the second look before "not found"), with the passages cut into `--window`-sentence windows,
`--top-k` of them offered and the prompt kept within `--prompt-tokens`, by the service `eval --data` judges (the
empty workspace's fits and its few shots: the shipped ones). The baseline is that command's own per-question file from
the same machine (`--against`; llama.cpp's kernels differ between CPUs, so greedy answers do too); a question the
service routes elsewhere (a Who route) keeps its row there.
Rows are kept per question in `<name>.jsonl.gz` (resumable: a run stopped anywhere continues where it stopped).

    whoqa eval --workspace EMPTY --data ws-split/unseen --kinds other      # the served answers: the baseline
    gzip -c EMPTY/eval-data/unseen/served/other-*.jsonl > docs/experiments/passages-and-first-answer/served_unseen_other.jsonl.gz
    python docs/experiments/passages-and-first-answer/window_answers.py --target EMPTY/eval-data/unseen --window 1 --top-k 20
    python docs/experiments/passages-and-first-answer/window_answers.py --target EMPTY/eval-data/unseen --window 5 --top-k 8 \\
        --prompt-tokens 1024 --books 4
"""
from __future__ import annotations

import argparse
import gzip
import json
import time
from dataclasses import replace
from pathlib import Path

from whoqa.core.metrics import paired_book_bootstrap
from whoqa.evaluation.unseen import other_questions
from whoqa.retrieval.passages import PassageConfig
from whoqa.service.answers import Service
from whoqa.service.schema import ServiceConfig
from whoqa.service.scorers import llm_answer

from pool_answers import per_question, rows, scores  # (this folder's: the served answers' scores)

HERE = Path(__file__).parent
SERVED = HERE / "served_unseen_other.jsonl.gz"  # `eval --data ... --kinds other`'s per-question file, gzipped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=Path, required=True, help="the unseen books' prepared folder (eval-data/unseen)")
    ap.add_argument("--window", type=int, default=1, help="sentences a passage holds (served: 5)")
    ap.add_argument("--top-k", type=int, default=20, help="passages offered; the prompt keeps what fits (served: 5)")
    ap.add_argument("--prompt-tokens", type=int, default=512, help="the reader's prompt budget (served: 512)")
    ap.add_argument("--books", type=int, default=None, help="only the first N books (by id)")
    ap.add_argument("--workspace", type=Path, default=None, help="the workspace whose fits serve (default: the one "
                    "holding --target, EMPTY)")
    ap.add_argument("--against", type=Path, default=SERVED, help="the served answers, per question")
    ap.add_argument("--name", default=None, help="the output's name (default window<W>_k<K>_t<T>)")
    a = ap.parse_args()
    name = a.name or f"window_answers_w{a.window}_k{a.top_k}_t{a.prompt_tokens}"
    qs = {q["question_id"]: q for q in other_questions(a.target)}
    books = sorted({q["document_id"] for q in qs.values()})[:a.books]
    qs = {i: q for i, q in qs.items() if q["document_id"] in books}
    served = rows(a.against)
    if not served:
        raise SystemExit(f"no served answers in {a.against}: run the eval command in this file's docstring first")
    path = HERE / f"{name}.jsonl.gz"
    got = rows(path)
    svc = Service(a.target, ServiceConfig(passages=PassageConfig(window=a.window)),
                  fits_from=a.workspace or a.target.parents[1])  # (as `eval --data` serves: served_service)
    todo = [i for i in qs if i in served and i not in got]
    t0 = time.perf_counter()
    for n, i in enumerate(todo, 1):
        q = qs[i]
        route = svc.route(q["document_id"], q["question"])
        if route.name != "llm":  # (a Who route: the window is not this question's)
            got[i] = {**served[i], "kept_served": True}
        else:
            t = time.perf_counter()
            ob = svc.open(q["document_id"])
            query = ob.read(ob.query(q["question"]))
            options = {**(route.options or {}), "top_k": a.top_k, "prompt_tokens": a.prompt_tokens}
            ans = llm_answer(svc, ob, query, replace(route, options=options))
            got[i] = {"question_id": i, "book": q["document_id"], "route": route.name, "model": ans.model,
                      "answer": ans.answer, "found": bool(ans.found), "support": ans.support,
                      "withheld": ans.withheld, "passages": len(ans.passages),
                      "second_look": any("a first reading" in w for w in ans.why),
                      "seconds": round(time.perf_counter() - t, 2)}
        with gzip.open(path, "at", encoding="utf-8") as f:
            f.write(json.dumps(got[i]) + "\n")
        print(f"{n}/{len(todo)} {time.perf_counter() - t0:.0f}s found={got[i]['found']} {got[i]['answer']!r}",
              flush=True)
    base = served
    ids = [i for i in qs if i in base and i in got]
    refs = [[qs[i]["answer1"], qs[i]["answer2"]] for i in ids]
    secs = sorted(got[i]["seconds"] for i in ids if not got[i].get("kept_served"))
    base_secs = sorted(base[i]["seconds"] + base[i].get("second_seconds", 0.0) for i in ids
                       if not got[i].get("kept_served"))
    out = {"questions": len(ids), "of": len(qs), "books": len(books),
           "arm": {"window": a.window, "top_k": a.top_k, "prompt_tokens": a.prompt_tokens},
           "against": a.against.name,
           "baseline": {**scores(base, ids, refs), "seconds_p50": base_secs[len(base_secs) // 2] if base_secs else None},
           "this arm": {**scores(got, ids, refs), "seconds_p50": secs[len(secs) // 2] if secs else None,
                        "passages_read_mean": round(sum(got[i].get("passages", 0) for i in ids if "passages" in got[i])
                                                    / max(1, sum("passages" in got[i] for i in ids)), 2)},
           "arm minus baseline, ROUGE-L counting not found as empty, resampled by book": paired_book_bootstrap(
               per_question(got, ids, refs), per_question(base, ids, refs), [qs[i]["document_id"] for i in ids],
               ("rouge_l",))["difference"]}
    (HERE / f"{name}.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
