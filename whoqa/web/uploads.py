"""Uploads as jobs: a book file checked as `ask` checks it, then processed by one worker thread in turn (holding the
workspace lock like every other writer); each job's state kept in WS/jobs/, so it survives a page reload, and a job a
server left behind when it stopped is marked failed by the next one."""
from __future__ import annotations

import json
import logging
import re
import time
import uuid
from pathlib import Path

from whoqa.core.text import BOOK_SUFFIXES, read_book_text, text_book_id
from whoqa.core.store import intake_gaps, read_source
from whoqa.core.errors import DataError
from whoqa.core.text import extract_body
from whoqa.core.store import forget_derived
from whoqa.core.artifacts import DamagedArtifact, read_cache, read_json
from whoqa.core.book import is_done
from whoqa.core.files import atomic_write
from whoqa.core.jobs import process_alive
from whoqa.core.workspace import locked
from whoqa.web.errors import ApiError
from whoqa.web.guard import over_limit

log = logging.getLogger(__name__)
BOOK_ID = re.compile(r"^[0-9a-f]{40}$")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


class Uploads:
    """The upload half of the web service (whoqa.web.books.Library): needs its cfg, ws, jobs_dir, uploads, answers,
    worker and owner."""

    def upload(self, name: str, data: bytes) -> dict:
        """Check an uploaded book file (a format of whoqa.core.text.FORMATS, by its name's suffix) as `ask` does; a new book becomes a background job, a known one is reused."""
        if self.cfg.read_only:
            raise ApiError(403, "this workspace is served read-only (whoqa serve --read-only): uploads are off")
        if len(data) > self.cfg.max_upload_mb * 1e6:  # (the API checks first, with the form's own count)
            raise ApiError(413, over_limit(name, len(data), self.cfg.max_upload_mb * 1e6))
        self.uploads.mkdir(parents=True, exist_ok=True)
        suffix = Path(name).suffix.lower()
        suffix = suffix if suffix in BOOK_SUFFIXES else ".txt"  # read as `ask` reads such a file
        tmp = self.uploads / f"{uuid.uuid4().hex}{suffix}"
        tmp.write_bytes(data)
        try:
            body = extract_body(read_book_text(tmp))
            if not body.strip():
                raise DataError(f"{name} holds no story text once a Project Gutenberg header and licence are removed")
        except (DataError, ValueError, UnicodeError) as e:
            tmp.unlink(missing_ok=True)
            raise ApiError(400, str(e).replace(str(tmp), name)) from None
        book_id = text_book_id(body)
        path = self.uploads / f"{book_id}{suffix}"
        tmp.replace(path)
        job = {"id": uuid.uuid4().hex, "book": book_id, "file": name, "state": "queued", "created": time.time()}
        if self._whole(book_id):
            job.update(state="done", reused=True, finished=time.time())
            self._save_job(job)
            return job
        self._save_job(job)
        self.worker.submit(self._process, job, path)  # (a book cut short is completed: folded in, then listed)
        return job

    def _whole(self, book_id: str) -> bool:
        """Whether the book is taken in whole: its files, and the records a finished intake writes after them."""
        return is_done(self.ws.books / book_id, book_id) and not intake_gaps(self.ws, book_id)

    def recover(self) -> list[dict]:
        """Jobs left queued or running by a server that is gone (kill -9, a crash, a reboot) are marked failed, so
        none waits forever; the books they leave incomplete (cut short, or not yet folded in or listed:
        `_clean_partial`) are removed by the upload worker, under the workspace lock (a command adding books meanwhile
        is waited for). Returns the jobs marked."""
        lost = []
        for path in sorted(self.jobs_dir.glob("*.json")) if self.jobs_dir.is_dir() else []:
            job = read_cache(path, dict)
            if not job or job.get("state") not in ("queued", "running") or process_alive(job.get("owner")):
                continue
            job.update(state="failed", error="the server stopped while this upload was being processed: upload the "
                                             "book again", finished=time.time())
            self._save_job(job)
            log.warning("upload %s (job %s) was cut short by the server stopping: marked failed", job.get("file"),
                        job.get("id"))
            lost.append(job)
        if lost:
            self.worker.submit(self._clean_partial, [j.get("book") for j in lost])
        return lost

    def _clean_partial(self, books: list) -> None:
        """Remove each lost job's book that the workspace's records do not show as whole (its files cut short, or not
        yet folded into the word vectors or listed in texts.json: a kill after the engine wrote the book), with
        everything derived from it; a whole one, and a book `prepare` made, are kept."""
        with locked(self.ws):
            for b in books:
                if not (isinstance(b, str) and BOOK_ID.match(b)):
                    continue
                folder = self.ws.books / b
                try:
                    whole = self._whole(b)
                except DamagedArtifact as e:  # the records cannot tell: kept, and `whoqa check` names the damage
                    log.warning("upload of book %s was cut short, and %s: the book is kept", b, e)
                    continue
                if folder.exists() and not whole and not _prepared(folder):
                    log.warning("book %s of an upload cut short is incomplete (%s): removed", b,
                                "; ".join(intake_gaps(self.ws, b)) if is_done(folder, b) else "its files cut short")
                    forget_derived(self.ws, b)
                if not folder.exists() and not self._queued(b):  # (its file, unless uploaded again meanwhile)
                    for f in self.uploads.glob(f"{b}.*"):
                        f.unlink(missing_ok=True)

    def _queued(self, book_id: str) -> bool:
        """Whether this server has a job for the book waiting or under way (it reads the book's uploaded file)."""
        for path in self.jobs_dir.glob("*.json") if self.jobs_dir.is_dir() else []:
            job = read_cache(path, dict) or {}
            if job.get("book") == book_id and job.get("state") in ("queued", "running") \
                    and job.get("owner") == self.owner:
                return True
        return False

    def _process(self, job: dict, path: Path) -> None:
        existed = (self.ws.books / job["book"]).exists()
        job.update(state="running", started=time.time())
        self._save_job(job)
        try:
            self.answers.vectors_later(self.answers.intake(text=path))  # (vectors for a first other question)
            if self.cfg.warm:  # (a load that failed at start, or models loaded since by another route)
                self.warming = self.answers.warm()
            job.update(state="done", finished=time.time())
        except Exception as e:  # the upload fails alone, and leaves no half-made book behind
            log.warning("upload %s failed: %s", job["file"], e)
            if not existed and not is_done(self.ws.books / job["book"], job["book"]):
                with locked(self.ws):
                    forget_derived(self.ws, job["book"])
            job.update(state="failed", error=(str(e).splitlines()[0] if str(e) else type(e).__name__)
                       .replace(str(path), job["file"]), finished=time.time())
        self._save_job(job)

    def _save_job(self, job: dict) -> None:
        if job.get("state") in ("queued", "running"):
            job["owner"] = self.owner  # (a job whose owner is gone is marked failed when a server starts)
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.jobs_dir / f"{job['id']}.json", json.dumps(job))

    def job(self, job_id: str) -> dict:
        if not JOB_ID.match(job_id or ""):
            raise ApiError(400, f"{job_id!r} is not a job id")
        path = self.jobs_dir / f"{job_id}.json"
        if not path.is_file():
            raise ApiError(404, f"no job {job_id}")
        try:
            job = read_json(path, "upload the book again", dict)
        except DamagedArtifact:  # a crash while it was written: the job is lost, not the server
            raise ApiError(410, f"job {job_id}'s record {path} is damaged: upload the book again") from None
        if job.get("state") == "running" and job.get("owner") == self.owner:  # its stage now, with a percent
            job["progress"] = self.answers.stages.now()  # where known (one worker: the service's stage is the job's)
        return job


def _prepared(folder: Path) -> bool:
    """Whether `whoqa prepare` made the book (its source.json names a data folder's file, not a text taken in):
    `prepare` keeps its own records of it, so an upload's recovery never removes it."""
    try:
        source = read_source(folder)
    except DamagedArtifact:
        return False
    return isinstance(source, dict) and "text" not in source
