"""`whoqa download`: build a NarrativeQA-layout folder from the public sources (needs a connected machine).

NarrativeQA's csv files come from its repository; each story from its story_url. Resumable: a story whose file is
already there is not fetched again; files are written through a .part file so an interrupted fetch leaves nothing.
Sizes are checked against documents.csv's story_file_size: a mismatch (Gutenberg files are revised now and then) is
kept but reported.
"""
from __future__ import annotations

import logging
import os
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from data_prep.narrativeqa import DataError, NarrativeQA

log = logging.getLogger(__name__)
NARRATIVEQA_BASE = "https://raw.githubusercontent.com/google-deepmind/narrativeqa/master"
CSV_PATHS = {"documents.csv": "documents.csv", "qaps.csv": "qaps.csv",
             "summaries.csv": "third_party/wikipedia/summaries.csv"}
USER_AGENT = "whoqa-download/0.1 (+https://github.com/whoqa)"


@dataclass
class DownloadConfig:
    data: str
    csv_base_url: str | None = None
    books: list[str] = field(default_factory=list)
    kind: str = "gutenberg"  # gutenberg | movie | all
    split: str | None = None
    max_books: int | None = None
    timeout: float = 60.0
    retries: int = 2


def fetch(url: str, dest: Path, timeout: float = 60.0, retries: int = 2) -> int:
    """Download url to dest atomically; returns its size in bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    for attempt in range(retries + 1):
        try:
            req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(req, timeout=timeout) as r, open(part, "wb") as f:
                while chunk := r.read(1 << 16):
                    f.write(chunk)
            os.replace(part, dest)
            return dest.stat().st_size
        except OSError as e:
            if part.exists():
                part.unlink()
            if attempt == retries:
                raise
            log.warning("fetching %s failed (%s); retrying", url, e)
            time.sleep(1 + attempt)
    raise AssertionError("unreachable")


def download(cfg: DownloadConfig) -> dict:
    root = Path(cfg.data)
    base = (cfg.csv_base_url or NARRATIVEQA_BASE).rstrip("/")
    for name, rel in CSV_PATHS.items():
        dest = root / "narrativeqa" / name
        if not dest.is_file():
            try:
                fetch(f"{base}/{rel}", dest, cfg.timeout, cfg.retries)
            except OSError as e:
                if name == "summaries.csv":
                    log.warning("summaries.csv not fetched (%s); it is only needed by the BERT ranker", e)
                    continue
                raise DataError(f"could not fetch {base}/{rel} ({e}); check the connection or --csv-base-url") from e
    docs = NarrativeQA(root).documents()
    chosen = [d for d in docs.values()
              if (not cfg.books or d.document_id in cfg.books)
              and (cfg.kind == "all" or d.kind == cfg.kind)
              and (cfg.split is None or d.set == cfg.split)]
    unknown = sorted(set(cfg.books) - set(docs))
    if unknown:
        raise DataError(f"document id(s) not in documents.csv: {', '.join(unknown[:5])}; check --book")
    if cfg.max_books is not None:
        chosen = chosen[:cfg.max_books]
    report = {"folder": str(root), "requested": len(chosen), "fetched": [], "already_there": [], "failed": {},
              "size_mismatch": {}}
    from whoqa.core.progress import bar as progress_bar
    for d in progress_bar(chosen, desc="download", unit="book"):
        dest = root / "books" / f"{d.document_id}.txt"
        if dest.is_file():
            report["already_there"].append(d.document_id)
            size = dest.stat().st_size
        else:
            try:
                size = fetch(d.story_url, dest, cfg.timeout, cfg.retries)
                report["fetched"].append(d.document_id)
            except OSError as e:
                report["failed"][d.document_id] = f"{d.story_url}: {e}"
                continue
        if d.story_file_size and size != d.story_file_size:
            report["size_mismatch"][d.document_id] = {"expected": d.story_file_size, "got": size}
    if report["size_mismatch"]:
        log.warning("%d book(s) differ in size from documents.csv's story_file_size (revised upstream?)",
                     len(report["size_mismatch"]))
    return report
