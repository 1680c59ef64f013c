"""`whoqa serve`: a workspace's books as a web page and a JSON API (FastAPI, served by uvicorn).

The page (page.html, one file, no build step) uses only the API, which mirrors the CLI and the Python API:

    GET  /api/books                      the workspace's books: title, words, characters
    POST /api/books                      upload a book (plain text, EPUB or HTML) (`ask --text`'s checks) -> a job
    GET  /api/jobs/{id}                  a job's state (kept in WS/jobs/, so it survives a page reload)
    GET  /api/books/{id}                 one book, with its cast
    GET  /api/books/{id}/characters      the cast: names, aliases, gender, mentions, mentions per tenth of the book
    GET  /api/books/{id}/characters/{c}  one character's mentions in context
    POST /api/books/{id}/ask             {"question", "route"?, "upto"?} -> `whoqa ask`'s Answer JSON (whoqa.service)

No model logic lives here: answers and uploads go through `whoqa.service` (its models load once, on first use, behind
one lock), one worker thread processes uploads in turn, holding the workspace lock like every other writer. Book ids
are checked against their 40-hex-digit form before any path is built, so no request reaches outside the workspace;
only the page itself can change the workspace (`only_the_page`).
"""
from __future__ import annotations

import json
import logging
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI, File, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from whoqa.core.store import load_texts
from whoqa.core.artifacts import DamagedArtifact, problem, read_cache, read_json
from whoqa.core.book import Book, BookFormatError, is_done, token_summary
from whoqa.core.files import atomic_write
from whoqa.core.jobs import process_alive, process_identity
from whoqa.core.workspace import ReadOnly, Workspace, locked, serve_read_only
from whoqa.service import Service as Answers, ServiceConfig
from whoqa.core.book import read_characters
from whoqa.core.text import read_book_text, text_book_id
from whoqa.core.epub import EPUB_SUFFIXES, HTML_SUFFIXES
from whoqa.core.text import DataError, extract_body
from whoqa.core.store import read_state
from whoqa.core.store import forget_derived
from whoqa.retrieval.lucene import MissingPackage
import ipaddress

log = logging.getLogger(__name__)
BOOK_ID = re.compile(r"^[0-9a-f]{40}$")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
PAGE = Path(__file__).with_name("page.html")


@dataclass
class ServeConfig:
    workspace: str = "ws"
    host: str = "127.0.0.1"
    port: int = 8000
    read_only: bool = False  # serve a shared workspace: no uploads
    max_upload_mb: float = 20.0  # a long novel is 1-2 MB of text
    device: str = "auto"
    llm: str | None = None  # the local LLM that reads (default: the best measured one installed)
    allow_hosts: list[str] = field(default_factory=list)  # other Host names the page is reached by (a proxy's)


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def sentence_segments(book: Book, sid: int) -> list[dict]:
    """A sentence as text segments, each character mention its own segment with the character's id (for
    highlighting and links): [{"text", "char"}], char None for plain text; spaced as the book spaces it
    (Book.sentence_text: "don't", "Kelso's")."""
    first, last = book.sentences[sid]
    text, at = book.sentence_text(sid)
    starts = {m.start for m in book.mentions if first <= m.start < last}
    out: list[dict] = []
    for k, t in enumerate(book.tokens[first:last]):
        char = book.token_char.get(t.index)
        space = text[at[k - 1] + len(book.tokens[t.index - 1].word):at[k]] if k else ""
        if out and out[-1]["char"] == char and t.index not in starts:
            out[-1]["text"] += space + t.word
        elif not space:
            out.append({"text": t.word, "char": char})
        elif out[-1]["char"] is None:  # spaces stay outside the highlighted mentions
            out[-1]["text"] += space
            out.append({"text": t.word, "char": char})
        elif char is None:
            out.append({"text": space + t.word, "char": None})
        else:
            out += [{"text": space, "char": None}, {"text": t.word, "char": char}]
    return out


class Service:
    """What the API does, without HTTP: books, the cast, jobs and answers of one workspace."""

    def __init__(self, cfg: ServeConfig):
        self.cfg = cfg
        if cfg.read_only:
            serve_read_only(cfg.workspace)
        self.ws = Workspace(cfg.workspace)
        self.jobs_dir = self.ws.jobs
        self.uploads = self.ws.uploads
        self.answers = Answers(self.ws, ServiceConfig(device=cfg.device, llm=cfg.llm))
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whoqa-upload")
        self.owner = process_identity()  # recorded with each job this server processes
        if not cfg.read_only:
            self.recover()

    # --- books -------------------------------------------------------------------------------------------------
    def book_id(self, book_id: str) -> str:
        if not BOOK_ID.match(book_id or ""):
            raise ApiError(400, f"{book_id!r} is not a book id (40 hex digits)")
        if not is_done(self.ws.books / book_id, book_id):
            raise ApiError(404, f"book {book_id} is not in this workspace")
        return book_id

    def book(self, book_id: str) -> Book:
        """A book, read once by the answering service (which keeps the few most recent). Served read-only, a book
        without its index is still read for its cast (answers need the index, and say so)."""
        book_id = self.book_id(book_id)
        try:
            return self.answers.book(book_id)
        except ReadOnly:
            return Book.load(self.ws.books / book_id, book_id)

    def summary(self, book_id: str) -> dict:
        """Title, words, sentences and characters of a book, read without loading it and kept beside it
        (WS/books/<id>/summary.json, remade when the book's files change)."""
        book_id = self.book_id(book_id)
        tokens, chars = self.ws.book_file(book_id, ".tokens"), self.ws.book_file(book_id, ".book")
        stamp = [tokens.stat().st_mtime_ns, tokens.stat().st_size, chars.stat().st_mtime_ns]
        path = self.ws.page_summary(book_id)
        saved = read_cache(path, dict)  # no cache yet, or a damaged one: made again below
        if saved and saved.get("stamp") == stamp and "summary" in saved:
            return saved["summary"]
        try:
            words, sentences, first = token_summary(tokens)
        except (UnicodeDecodeError, ValueError) as e:  # the book's own file is damaged: named, this book alone
            raise BookFormatError(f"{tokens}: {problem(e)}: redo the book with `whoqa prepare --book {book_id}` "
                                  f"after deleting its folder {tokens.parent}") from None
        texts = load_texts(self.ws)
        title = (texts.get(book_id) or {}).get("first_line") or " ".join(first) or book_id[:12]
        out = {"id": book_id, "title": title, "words": words, "sentences": sentences,
               "characters": len(read_characters(chars))}
        if not self.cfg.read_only:  # (served read-only: computed again next time, never written)
            try:
                atomic_write(path, json.dumps({"stamp": stamp, "summary": out}))
            except OSError:  # a workspace on a read-only disk: computed again next time
                pass
        return out

    def books(self) -> list[dict]:
        """Every prepared book's summary; a book whose files are damaged is listed with its one-line error
        ("damaged"), so one bad book never hides the others."""
        ids = sorted(p.name for p in self.ws.books.iterdir() if BOOK_ID.match(p.name) and is_done(p, p.name)) \
            if self.ws.books.is_dir() else []
        out = []
        for b in ids:
            try:
                out.append(self.summary(b))
            except (ValueError, OSError) as e:
                line = str(e).splitlines()[0] if str(e) else type(e).__name__
                log.warning("book %s: %s", b, line)
                out.append({"id": b, "title": b[:12], "words": 0, "sentences": 0, "characters": 0, "damaged": line})
        return out

    def characters(self, book_id: str) -> list[dict]:
        """The book's cast (whoqa.ranker.cast): its people, each once (a person's name clusters merged), most
        mentioned first, with how their mentions spread over the book's tenths."""
        from whoqa.ranker.cast import cast_of
        book = self.book(book_id)
        cast = cast_of(book)
        n = max(1, len(book.tokens))
        tenths: dict[int, list[int]] = {r: [0] * 10 for r in cast.groups}
        for m in book.mentions:
            r = cast.of(m.char_id)
            if r is not None:
                tenths[r][min(9, 10 * m.start // n)] += 1
        people = []
        for r, members in cast.groups.items():
            aliases = list(dict.fromkeys(a for c in members for a in book.characters[c].aliases))
            people.append({"id": r, "name": cast.names[r], "aliases": aliases, "gender": book.characters[r].gender,
                           "mentions": sum(book.characters[c].count for c in members), "per_tenth": tenths[r]})
        return sorted(people, key=lambda c: -c["mentions"])

    def character(self, book_id: str, char_id: int, limit: int = 40) -> dict:
        from whoqa.ranker.cast import cast_of
        book = self.book(book_id)
        c = next((x for x in self.characters(book_id) if x["id"] == char_id), None)
        if c is None:
            raise ApiError(404, f"book {book_id} has no character {char_id} in its cast")
        person = cast_of(book).of
        sids = sorted({book.tokens[m.start].sentence for m in book.mentions if person(m.char_id) == char_id})
        return {**c, "sentences_with_mentions": len(sids),
                "contexts": [{"sentence": s, "segments": sentence_segments(book, s)} for s in sids[:limit]]}

    # --- uploads -----------------------------------------------------------------------------------------------
    def upload(self, name: str, data: bytes) -> dict:
        """Check an uploaded book file (text, EPUB, HTML, by its name's suffix) as `ask` does; a new book becomes a background job, a known one is reused."""
        if self.cfg.read_only:
            raise ApiError(403, "this workspace is served read-only (whoqa serve --read-only): uploads are off")
        if len(data) > self.cfg.max_upload_mb * 1e6:
            raise ApiError(413, f"{name} is {size(len(data))}: the limit is {size(self.cfg.max_upload_mb * 1e6)} "
                                f"(whoqa serve --max-upload-mb)")
        self.uploads.mkdir(parents=True, exist_ok=True)
        suffix = Path(name).suffix.lower()
        suffix = suffix if suffix in EPUB_SUFFIXES + HTML_SUFFIXES else ".txt"  # read as `ask` reads such a file
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
        if is_done(self.ws.books / book_id, book_id) and self._folded(book_id):
            job.update(state="done", reused=True, finished=time.time())
            self._save_job(job)
            return job
        self._save_job(job)
        self.worker.submit(self._process, job, path)
        return job

    def _folded(self, book_id: str) -> bool:
        state = read_state(self.ws)
        return state is None or book_id in state.get("books", [])

    def recover(self) -> list[dict]:
        """Jobs left queued or running by a server that is gone (kill -9, a crash, a reboot) are marked failed, so
        none waits forever; the partial books they leave are removed by the upload worker, under the workspace lock
        (a command adding books meanwhile is waited for). Returns the jobs marked."""
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
        with locked(self.ws):
            for b in books:
                if isinstance(b, str) and BOOK_ID.match(b):
                    if (self.ws.books / b).exists() and not is_done(self.ws.books / b, b):
                        forget_derived(self.ws, b)
                    (self.uploads / f"{b}.txt").unlink(missing_ok=True)

    def _process(self, job: dict, path: Path) -> None:
        existed = (self.ws.books / job["book"]).exists()
        job.update(state="running", started=time.time())
        self._save_job(job)
        try:
            self.answers.intake(text=path)
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
            return read_json(path, "upload the book again", dict)
        except DamagedArtifact:  # a crash while it was written: the job is lost, not the server
            raise ApiError(410, f"job {job_id}'s record {path} is damaged: upload the book again") from None

    # --- answers -----------------------------------------------------------------------------------------------
    def ask(self, book_id: str, question: str, route: str = "auto", upto: str | None = None) -> dict:
        """`whoqa ask`'s answer (whoqa.service: the same route, the same JSON), each evidence sentence with its
        text segments for highlighting."""
        ans = self.answers.answer(self.book_id(book_id), question, route, upto or None).to_json()
        book = self.book(book_id)
        for e in ans["evidence"] + ans["attention"]:
            e["segments"] = sentence_segments(book, e["sentence"])
        return ans


def size(n: float) -> str:
    """A byte count as a person reads it: 850 bytes, 12.3 kB, 4.56 MB."""
    n = float(n)
    if n < 1000:
        return f"{n:.0f} bytes"
    if n < 1e6:
        return f"{n / 1e3:.3g} kB"
    return f"{n / 1e6:.3g} MB"


JSON_LIMIT = 64_000  # the largest JSON body accepted (a question is at most 500 characters)
FORM_OVERHEAD = 64_000  # an upload's multipart framing, beyond the file itself


class BodyLimit:
    """Request bodies over their limit are refused with 413 while they arrive, never read or spooled whole: at once
    when Content-Length says so, else as soon as the bytes received pass it. Uploads (POST /api/books) may hold the
    largest book file accepted (plus the form's framing), other bodies JSON_LIMIT."""

    def __init__(self, app, max_upload_bytes: float):
        self.app, self.upload = app, int(max_upload_bytes)

    def limit(self, scope) -> tuple[int, str]:
        if scope["path"].rstrip("/") == "/api/books":
            return (self.upload + FORM_OVERHEAD,
                    f"the limit for a book is {size(self.upload)} (whoqa serve --max-upload-mb)")
        return JSON_LIMIT, f"the limit for a request is {size(JSON_LIMIT)}"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        limit, why = self.limit(scope)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            log.info("refused a body of %s on %s: over the limit", size(int(declared)), scope["path"])
            response = JSONResponse({"error": f"the request is {size(int(declared))}: {why}"}, status_code=413)
            return await response(scope, receive, send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:  # (FastAPI passes an HTTPException on: the handler answers it)
                    raise HTTPException(413, f"the request is over {size(limit)} (more was still coming): {why}")
            return message

        await self.app(scope, counted, send)


class Question(BaseModel):
    question: str
    route: str = "auto"  # as `whoqa ask --route`
    upto: str | None = None  # as `whoqa ask --upto`: "40%" or "Chapter 12", no spoilers after it


def create_app(cfg: ServeConfig) -> FastAPI:
    """The FastAPI application of a workspace (uvicorn serves it; tests call it directly)."""
    service = Service(cfg)
    app = FastAPI(title="whoqa", description="Questions about whole books: the cast, Who answers with evidence, and "
                                             "a reader for the rest.", version="1")
    app.state.service = service
    app.add_middleware(BodyLimit, max_upload_bytes=cfg.max_upload_mb * 1e6)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError):
        return JSONResponse({"error": e.message}, status_code=e.status)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException):
        return JSONResponse({"error": str(e.detail)}, status_code=e.status_code)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, e: RequestValidationError):
        first = e.errors()[0] if e.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        return JSONResponse({"error": f"bad request: {where} {first.get('msg', '')}".strip()}, status_code=422)

    async def expected(request: Request, e: Exception):
        """Expected errors (bad input, a workspace missing a stage, a damaged artifact: what the CLI says in one line)
        are 4xx with that line, logged as one line (handled here, below the server's error middleware, they never
        reach the log as "Exception in ASGI application" with a traceback); anything else goes on as a bug."""
        status = expected_status(e)
        if status is None:
            raise e
        line = one_line(e)
        log.warning("%s %s -> %d: %s", request.method, request.url.path, status, line)
        return JSONResponse({"error": line}, status_code=status)

    for kind in (ValueError, OSError, DataError, MissingPackage):
        app.add_exception_handler(kind, expected)

    @app.exception_handler(Exception)
    async def error(request: Request, e: Exception):
        """A bug: logged with its traceback under an id the response carries (an expected error that reaches here
        still answers with its line)."""
        status = expected_status(e)
        if status:
            return JSONResponse({"error": one_line(e)}, status_code=status)
        incident = uuid.uuid4().hex[:12]
        log.exception("internal error %s on %s", incident, request.url.path)
        return JSONResponse({"error": f"internal error {incident} (the server's log has its traceback): "
                                      f"{type(e).__name__}", "incident": incident}, status_code=500)

    hosts, wildcard = allowed_hosts(cfg), cfg.host in ("0.0.0.0", "::", "")

    @app.middleware("http")
    async def only_the_page(request: Request, call_next):
        """Only the page itself drives the server: a Host it is not served as (DNS rebinding) is refused, and a
        request that changes something must come from the page's own origin and carry its X-Whoqa header (a
        non-simple request, which another site's form or script cannot send without a CORS grant)."""
        host = host_name(request.headers.get("host", ""))
        if host not in hosts and not (wildcard and _ip_literal(host)):
            return JSONResponse({"error": f"host {host!r} is not where this server is served: use "
                                          f"http://{cfg.host}:{cfg.port}/ (or whoqa serve --allow-host NAME)"},
                                status_code=403)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("origin")
            site = request.headers.get("sec-fetch-site")
            if origin is not None and origin != "null" and host_name(origin.split("://", 1)[-1]) != host:
                return JSONResponse({"error": f"a request from {origin} may not change this workspace: only the "
                                              f"page itself can"}, status_code=403)
            if origin == "null" or site not in (None, "same-origin", "none"):
                return JSONResponse({"error": "a cross-site request may not change this workspace: only the page "
                                              "itself can"}, status_code=403)
            if request.headers.get("x-whoqa") is None:
                return JSONResponse({"error": "a request that changes the workspace must carry the page's X-Whoqa "
                                              "header (scripts: add -H 'X-Whoqa: 1')"}, status_code=403)
        return await call_next(request)

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(PAGE, media_type="text/html")

    @app.get("/api/books")
    def list_books() -> list[dict]:
        return service.books()

    @app.post("/api/books", status_code=202)
    async def upload(file: UploadFile = File(...)) -> dict:
        data = await file.read(int(cfg.max_upload_mb * 1e6) + 1)
        return service.upload(Path(file.filename or "book.txt").name, data)

    @app.get("/api/jobs/{job_id}")
    def job(job_id: str) -> dict:
        return service.job(job_id)

    @app.get("/api/books/{book_id}")
    def book(book_id: str) -> dict:
        return {**service.summary(book_id), "cast": service.characters(book_id)[:50]}

    @app.get("/api/books/{book_id}/characters")
    def characters(book_id: str) -> list[dict]:
        return service.characters(book_id)

    @app.get("/api/books/{book_id}/characters/{char_id}")
    def character(book_id: str, char_id: int) -> dict:
        return service.character(book_id, char_id)

    @app.post("/api/books/{book_id}/ask")
    def ask(book_id: str, q: Question) -> dict:
        return service.ask(book_id, q.question, q.route, q.upto)

    return app


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def allowed_hosts(cfg: ServeConfig) -> set[str]:
    """The Host names a request may carry: the bound address (and the loopback names, when bound to loopback) and
    --allow-host's. (A server bound to every interface also takes any IP literal: a rebinding attack needs a name.)"""
    return {cfg.host.lower(), *(LOOPBACK if cfg.host in LOOPBACK else ()), *(h.lower() for h in cfg.allow_hosts)}


def host_name(value: str) -> str:
    """"127.0.0.1:8000" -> "127.0.0.1", "[::1]:8000" -> "::1", "Example.org" -> "example.org"."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


DISK = {28: "the disk is full: free some space", 30: "the workspace is on a read-only disk: serve it with "
                                                       "`whoqa serve --read-only`",
        13: "the workspace is not writable by the server's user", 1: "the workspace is not writable by the server's "
                                                                     "user"}


def one_line(e: Exception) -> str:
    """An expected error as one line: its own message, or for the disk's errors what is wrong and what to do (never
    a raw "[Errno 30] Read-only file system")."""
    if isinstance(e, OSError) and not isinstance(e, FileNotFoundError) and e.errno in DISK:
        return f"{e.filename or 'the workspace'}: {e.strerror}: {DISK[e.errno]}"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def expected_status(e: Exception) -> int | None:
    """The HTTP status of an error the user can act on (as the CLI's one-line errors), None for a bug."""
    if isinstance(e, MissingPackage):
        return 503  # the server lacks a package: the message says how to install it
    if isinstance(e, FileNotFoundError):
        return 409  # the workspace lacks a stage, a model or a file: the message says which command makes it
    if isinstance(e, (ValueError, DataError, UnicodeError)):
        return 400
    if isinstance(e, PermissionError) or isinstance(e, OSError) and e.errno in (28, 30):  # ENOSPC, EROFS
        return 507
    return None


def serve(cfg: ServeConfig) -> None:
    import uvicorn
    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving on %s: anyone who can reach this address can read the workspace%s", cfg.host,
                    "" if cfg.read_only else " and upload books (--read-only turns uploads off)")
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level="warning")
