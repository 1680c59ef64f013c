"""`whoqa check`: every artifact of a workspace opened as the stages open it, and each damaged one listed with the
command that rebuilds it. `--repair` deletes what is damaged and derived (caches, contexts, fold files, results,
models) so the named commands redo exactly that; a damaged book or vectors are named, never deleted.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from whoqa.core.artifacts import problem
from whoqa.core.workspace import Workspace


@dataclass
class Finding:
    path: str
    problem: str
    repair: str  # the command that rebuilds it
    removable: bool  # derived: deleting it and running `repair` restores it


def _json(path: Path) -> None:
    json.loads(path.read_text(encoding="utf-8"))


def check(workspace: str | Path) -> tuple[int, list[Finding]]:
    """(artifacts checked, findings) of a workspace."""
    import numpy as np
    import torch
    from whoqa.core.book import Book, is_done
    ws = Workspace(workspace)
    if not Path(workspace).is_dir():
        raise FileNotFoundError(f"workspace {workspace} not found")
    found: list[Finding] = []
    n = 0

    def probe(path: Path, fn, repair: str, removable: bool) -> None:
        nonlocal n
        n += 1
        try:
            fn(path)
        except Exception as e:
            found.append(Finding(str(path), problem(e), repair, removable))

    for folder in sorted(ws.books.iterdir()) if ws.books.is_dir() else []:
        if folder.is_dir() and is_done(folder, folder.name):
            probe(folder, lambda p: Book.load(p, p.name), f"delete {folder} and run `whoqa prepare --workspace "
                                                          f"{workspace} --book {folder.name}` (or `ask --text` it)",
                  False)
    if (ws.embeddings / "word2vec.model").is_file():
        from data_prep.embeddings import load
        probe(ws.embeddings / "word2vec.model", lambda p: load(workspace),
              f"`whoqa prepare --workspace {workspace} --rebuild-vectors`, then retrain the models", False)
    if ws.who.is_dir():
        from data_prep.who_set import load_who_set
        probe(ws.who, lambda p: load_who_set(workspace), f"`whoqa prepare --workspace {workspace}`", False)
    for ranker_dir in sorted(ws.contexts.iterdir()) if ws.contexts.is_dir() else []:
        for f in sorted(ranker_dir.glob("*.json")):
            probe(f, _json, f"`whoqa index --workspace {workspace} --ranker {ranker_dir.name}`", True)
    for f in sorted(ws.memdata.rglob("*.npz")) if ws.memdata.is_dir() else []:
        probe(f, lambda p: dict(np.load(p)), "none needed: rebuilt from the book when next read", True)
    for folder in sorted(ws.index.glob("bm25f/*")) if ws.index.is_dir() else []:
        if folder.is_dir() and ".tmp" not in folder.name:
            n += 1
            if not any(folder.glob("segments_*")):
                found.append(Finding(str(folder), "no Lucene commit (an interrupted build)",
                                     "none needed: rebuilt when the book is next asked or indexed", True))
    for run in sorted(ws.runs.iterdir()) if ws.runs.is_dir() else []:
        for f in sorted(run.glob("*.json")):
            probe(f, _json, f"`whoqa train --workspace {workspace}` with the run's options (config.json): the fold "
                            f"is redone", f.name.startswith("fold") or f.name == "summary.json")
    for model in sorted(ws.models.rglob("model.pt")) if ws.models.is_dir() else []:
        probe(model, lambda p: torch.load(p, map_location="cpu"), f"retrain it (`whoqa train --final` or "
                                                                  f"`whoqa pretrain`, as its config.json says)", True)
        probe(model.parent / "config.json", _json, "retrain it", True)
    for f in sorted(ws.results.glob("*.json")) if ws.results.is_dir() else []:
        probe(f, _json, f"`whoqa eval --workspace {workspace}`", True)
    for f in sorted(ws.adapted.rglob("*.pt")) if ws.adapted.is_dir() else []:
        probe(f, lambda p: torch.load(p, map_location="cpu"), "none needed: adapted again when next asked", True)
    return n, found


def repair(findings: list[Finding]) -> list[Finding]:
    """Delete the damaged derived artifacts; returns those left for the user (books, vectors, the Who set)."""
    left = []
    for f in findings:
        if not f.removable:
            left.append(f)
            continue
        p = Path(f.path)
        if p.name == "model.pt" or p.name == "config.json" and (p.parent / "model.pt").exists():
            shutil.rmtree(p.parent, ignore_errors=True)
        elif p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    return left
