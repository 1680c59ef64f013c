"""`whoqa check`: every artifact of a workspace opened as the stages open it, and each damaged one listed with the
command that rebuilds it. `--repair` never deletes: it moves what is damaged and derived (caches, contexts, fold
files, results, page caches, job records) into WS/quarantine/<time>/ so the named commands redo exactly that; a
damaged trained model, book, vectors or Who set is named with the command that remakes it and left where it is (a
damaged ensemble member stops `ask` with one line, rather than a smaller ensemble served in silence).

The artifacts, their readers and repairs are listed in docs/architecture.md ("Damaged state").
"""
from __future__ import annotations

import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from whoqa.core.artifacts import DamagedArtifact, load_binary, problem, read_json, verify_checksum
from whoqa.core.workspace import Workspace
import numpy as np
from whoqa.core.store import (SOURCE_FILE, book_command, load_vectors, load_who_set, prepare_command, read_artificial,
                              read_state, redo_book)
from whoqa.core.book import Book, is_done

CACHE, DERIVED, MODEL, SOURCE = "cache", "derived", "model", "source"  # what a repair may do with each


@dataclass
class Finding:
    path: str
    problem: str
    repair: str  # the command that rebuilds it
    kind: str  # CACHE (remade when next read), DERIVED (moved aside, then `repair` remakes it), MODEL, SOURCE (named)

    @property
    def movable(self) -> bool:
        return self.kind in (CACHE, DERIVED)


def _json(path: Path) -> None:
    read_json(path, "")


def check(workspace: str | Path) -> tuple[int, list[Finding]]:
    """(artifacts checked, findings) of a workspace."""
    import torch
    from whoqa.reader.model import READER_FILE
    ws = Workspace(workspace)
    if not Path(workspace).is_dir():
        raise FileNotFoundError(f"workspace {workspace} not found")
    found: list[Finding] = []
    n = 0
    prepare = prepare_command(workspace)

    def probe(path: Path, fn, repair: str, kind: str) -> None:
        nonlocal n
        n += 1
        try:
            fn(path)
        except DamagedArtifact as e:  # its reader's own words (a file recorded with it named too)
            found.append(Finding(str(path), e.problem + ("" if e.path == str(path) else f": {e.path}"), repair, kind))
        except Exception as e:
            found.append(Finding(str(path), problem(e), repair, kind))

    def files(folder: Path, pattern: str) -> list[Path]:
        return sorted(folder.glob(pattern)) if folder.is_dir() else []

    for folder in sorted(ws.books.iterdir()) if ws.books.is_dir() else []:
        if folder.is_dir() and not is_done(folder, folder.name):  # cut short (a killed upload or prepare)
            n += 1
            found.append(Finding(str(folder), "a partial book: its processing stopped before its files were all "
                                              "written", f"delete {shlex.quote(str(folder))}, then run "
                                                         f"{book_command(workspace, folder)}", SOURCE))
        if folder.is_dir() and is_done(folder, folder.name):
            probe(folder, lambda p: Book.load(p, p.name), redo_book(folder), SOURCE)
            unfinished = _unfinished_intake(workspace, folder)
            if unfinished:
                found.append(unfinished)
            for path, repair, kind in ((ws.page_summary(folder.name), "none needed: the page remakes it", CACHE),
                                       (ws.book(folder.name) / SOURCE_FILE,
                                        f"delete it; {prepare} records the book's source again", DERIVED)):
                if path.is_file():
                    probe(path, _json, repair, kind)
    for f in [ws.questions, ws.summaries, ws.texts, ws.engine_record, ws.data_record, ws.prepare_report,
              ws.who_report]:
        if f.is_file():
            probe(f, _json, prepare, DERIVED)
    for f in files(ws.artificial, "*.jsonl.gz"):
        probe(f, read_artificial, prepare + " (the book's artificial questions are made again)", DERIVED)
    if (ws.word2vec).is_file():
        vectors = f"{prepare_command(workspace, '--rebuild-vectors')}, then retrain the models"
        probe(ws.embeddings_state, lambda p: read_state(workspace), vectors, SOURCE)
        probe(ws.vocab, _json, vectors, SOURCE)
        probe(ws.word2vec, lambda p: load_vectors(workspace), vectors, SOURCE)
    if ws.who.is_dir():
        probe(ws.who, lambda p: load_who_set(workspace), prepare, SOURCE)
    for ranker_dir in sorted(ws.contexts.iterdir()) if ws.contexts.is_dir() else []:
        for f in sorted(ranker_dir.glob("*.json")):
            probe(f, _json, f"`whoqa index --workspace {workspace} --ranker {ranker_dir.name}`", DERIVED)
    for f in sorted(ws.memdata.rglob("*.npz")) if ws.memdata.is_dir() else []:
        probe(f, lambda p: dict(load_binary(p, np.load, "")), "none needed: rebuilt from the book when next read",
              CACHE)
    for folder in files(ws.index, "bm25f/*"):
        if folder.is_dir() and ".tmp" not in folder.name:
            n += 1
            if not any(folder.glob("segments_*")):
                found.append(Finding(str(folder), "no Lucene commit (an interrupted build)",
                                     "none needed: rebuilt when the book is next asked or indexed", CACHE))
    for run in sorted(ws.runs.iterdir()) if ws.runs.is_dir() else []:
        for f in sorted(run.rglob("*.json")):
            probe(f, _json, f"`whoqa train --workspace {workspace}` with the run's options (config.json): the fold "
                            f"is redone" if f.parent == run else f"`whoqa rerank {run.name} --workspace {workspace}` "
                                                                 f"with its options", DERIVED)
    for model in sorted(ws.models.rglob("model.pt")) if ws.models.is_dir() else []:
        top = next((p for p in model.parents if p.parent == ws.models), model.parent)
        retrain = (f"retrain it: `whoqa {'pretrain' if top.name == 'pretrain' else 'train --final'} --workspace "
                   f"{workspace}` with the options in {top / 'config.json'}")
        probe(model, lambda p: load_binary(p, lambda q: torch.load(q, map_location="cpu"), ""), retrain, MODEL)
        if (model.parent / "config.json").is_file() or model.parent == top:
            probe(model.parent / "config.json", _json, retrain, MODEL)
    for record in sorted(ws.models.rglob(READER_FILE)) if ws.models.is_dir() else []:  # saved readers' files
        probe(record, lambda p: verify_checksum(p, ""), f"delete {shlex.quote(str(record.parent))} and train it again "
                                                        f"(`whoqa reader ...` with the options in {record})", MODEL)
    for f in files(ws.results, "*.json"):
        probe(f, _json, f"`whoqa eval --workspace {workspace}`", DERIVED)
    for f in sorted(ws.adapted.rglob("*.pt")) if ws.adapted.is_dir() else []:
        probe(f, lambda p: load_binary(p, lambda q: torch.load(q, map_location="cpu"), ""),
              "none needed: adapted again when next asked", CACHE)
    for f in files(ws.jobs, "*.json"):
        probe(f, _json, "none needed: the upload's record is lost; upload the book again", CACHE)
    return n, found


def _unfinished_intake(workspace: str | Path, folder: Path) -> Finding | None:
    """A book taken in from a text whose files are all there but whose intake stopped before its last records (an
    upload or `ask --text` killed after the engine wrote the book): not listed in texts.json, which is written last.
    It would answer questions as if whole; the repair completes it (`ask --text` of its file folds it in and lists
    it), or, its file gone, removes it. (Where its record cannot be read, that damage is named on its own.)"""
    from whoqa.core.store import intake_gaps, read_source
    try:
        source = read_source(folder)
        if not (isinstance(source, dict) and isinstance(source.get("text"), str)):
            return None  # (a book `prepare` made: it keeps its own records)
        gaps = intake_gaps(workspace, folder.name)
    except DamagedArtifact:
        return None
    if not any("texts.json" in g for g in gaps):
        return None  # (listed: taken in whole, perhaps before the workspace had word vectors)
    text = Path(source["text"])
    repair = (f"run {book_command(workspace, folder)}: it completes the book" if text.is_file() else
              f"delete {shlex.quote(str(folder))} (its text {text} is gone), then add the book again")
    return Finding(str(folder), "a book whose intake stopped before the end (an upload or `ask --text` cut short): "
                                + " and ".join(gaps), repair, SOURCE)


def repair(workspace: str | Path, findings: list[Finding]) -> tuple[Path | None, list[Finding]]:
    """Move the damaged caches and derived artifacts into WS/quarantine/<time>/ (their paths kept; nothing is
    deleted); returns (that folder or None, the findings left for the user: models, books, vectors, the Who set)."""
    ws = Workspace(workspace)
    left = [f for f in findings if not f.movable]
    movable = [f for f in findings if f.movable]
    if not movable:
        return None, left
    dest = Path(ws.quarantine, time.strftime("%Y%m%d-%H%M%S"))
    for f in movable:
        p = Path(f.path)
        if not p.exists():
            continue
        target = dest / p.resolve().relative_to(Path(ws).resolve())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(p), str(target))
    return dest, left
