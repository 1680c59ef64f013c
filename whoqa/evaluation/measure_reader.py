"""`whoqa measure-reader`: a reader the shipped fits were not made with (a bigger GGUF, a model on a server), measured
before it is trusted.

The shipped choice ranking's weights and probabilities hold for the reader it was fit with; another reader's Who
answers carry no probability until it is measured here: its choice rows (whoqa.evaluation.choice_rows) on the
readers' questions (data_prep/readers: the fit half to fit on, the check half to report; the counts + choice arm reads no
written answer, so none is written) and, given a workspace of
the shared books (`--nqa`), on NarrativeQA's Who questions; the counts + choice arm (whoqa.evaluation.choice_fit) fit
on them and written to WS/models/reader_choice/<reader>.json, with its figures and the time it took. `ask`, `chat`
and `serve` then use it for that reader (whoqa.ranker.reader_choice.choice_fit_for).
"""
from __future__ import annotations

import datetime
import json
import time
from pathlib import Path

import numpy as np

from whoqa.evaluation.choice_fit import (READERS_WEIGHT, SEEDS, SERVED_ARM, _cols, cv, fit_arm, file_digest, halves,
                                         judged, leave_one_book_out, load_rows, ranked)
from whoqa.evaluation.choice_rows import make_rows
from whoqa.llm.config import model_name
from whoqa.ranker.reader_choice import CHOICE, ChoiceRanker, measured_fit_path

QUESTIONS = Path(__file__).resolve().parents[2] / "data_prep" / "readers" / "questions.tsv"
SPLIT = QUESTIONS.with_name("split.tsv")


def measure_reader(workspace: Path, llm: str, questions: Path = QUESTIONS,
                   books: Path = Path("../shared/data/books-unlabeled"), nqa: Path | None = None,
                   split: Path = SPLIT, limit: int | None = None, progress: bool = True) -> dict:
    """Measure `llm` (a model or a server's address) as the reader that chooses, and write its fit into
    `workspace` (resumable: the rows made are kept beside it); the figures, as written into the fit."""
    from whoqa.core.workspace import Workspace
    t = time.perf_counter()
    name = model_name(llm)
    out = measured_fit_path(Workspace(workspace), name)
    out.parent.mkdir(parents=True, exist_ok=True)
    readers_rows = out.with_name(f"{name}.readers.jsonl.gz")
    make_rows(workspace, readers_rows, questions, books, progress=progress, llm=llm, limit=limit, write=False)
    nqa_rows = out.with_name(f"{name}.nqa.jsonl.gz") if nqa is not None else None
    if nqa_rows is not None:
        make_rows(nqa, nqa_rows, progress=progress, llm=llm, limit=limit, write=False)
    readers = load_rows(readers_rows)
    fit_half, check = halves(readers, split)
    rows = load_rows(nqa_rows) if nqa_rows is not None else []
    if not fit_half and not rows:
        raise ValueError(f"none of {questions}'s Who questions is on the fit half of {split}, and no --nqa "
                         f"workspace was given: there is nothing to fit {name}'s choices on")
    arm, weight = SERVED_ARM, READERS_WEIGHT
    w = fit_arm(rows + fit_half * weight, arm)
    figures = {"check_half": {k: v for k, v in judged(check, [ranked(r, arm, w) for r in check]).items()
                              if k != "ranks"}}
    if len({r["key"].split(":")[0] for r in fit_half}) > 1:
        figures["fit_half"] = {k: v for k, v in leave_one_book_out(rows, fit_half, arm).items() if k != "ranks"}
    if len({r["book"] for r in rows}) >= 10:
        seeds = [cv(rows, fit_half, arm, s) for s in SEEDS]
        figures["book_level_cv"] = {m: f"{np.mean([s[m] for s in seeds]):.3f} ± {np.std([s[m] for s in seeds]):.3f}"
                                    for m in ("p@1", "p@5", "mrr", "ece")}
        ece = float(np.mean([s["ece"] for s in seeds]))
    else:
        ece = figures["check_half"]["ece"]
    first = readers[0]
    names = list(first["features"]) + list(CHOICE)
    source = (f"{len(rows)} NarrativeQA Who questions and " if rows else "") + \
        f"the readers' fit half ({len(fit_half)} questions), read by {name}"
    fit = ChoiceRanker([float(v) for v in w], [names[c] for c in _cols(arm)], len(rows) + len(fit_half), source,
                       None if ece is None else round(ece, 3), name, first.get("passages"))
    seconds = round(time.perf_counter() - t, 1)
    files = {str(f): file_digest(f) for f in (readers_rows, nqa_rows) if f is not None}
    provenance = {"by": "measure-reader", "made": datetime.date.today().isoformat(), "arm": arm,
                  "readers_weight": weight, "llm": llm, "seconds": seconds, "limit": limit, "rows": files,
                  "command": f"whoqa measure-reader --workspace {workspace} --llm {llm}"
                             + (f" --nqa {nqa}" if nqa is not None else "") + (f" --limit {limit}" if limit else ""),
                  **figures}
    out.write_text(json.dumps({**fit.__dict__, "provenance": provenance}, indent=1) + "\n")
    return {"fit": str(out), **provenance}


__all__ = ["measure_reader"]
