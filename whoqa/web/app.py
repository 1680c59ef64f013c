"""`whoqa serve`: a workspace's books as a web page and a JSON API (FastAPI, served by uvicorn).

The page (page.html, one file, no build step) uses only the API, which mirrors the CLI and the Python API:

    GET  /api/books                      the workspace's books: title, words, characters
    POST /api/books                      upload a book (whoqa.core.text.FORMATS; `ask --text`'s checks) -> a job
    GET  /api/jobs/{id}                  a job's state (kept in WS/jobs/, so it survives a page reload), with
                                         its stage and percent while it runs
    GET  /api/progress                   what the service is doing now: {"stage", "percent"?} ({"stage": null} idle)
    GET  /api/books/{id}                 one book, with its cast
    GET  /api/books/{id}/characters      the cast: names, aliases, gender, mentions, mentions per tenth of the book
    GET  /api/books/{id}/characters/{c}  one character's mentions in context
                                         (these three take ?upto= as ask does: the cast of the text before it only)
    POST /api/books/{id}/ask             {"question", "route"?, "upto"?, "html"?} -> `whoqa ask`'s Answer JSON
                                         (whoqa.service; with "html": true, also drawn as the page shows it)

No model logic lives here: answers and uploads go through `whoqa.service` (its models load once, on first use, behind
one lock), one worker thread processes uploads in turn, holding the workspace lock like every other writer. Book ids
are checked against their 40-hex-digit form before any path is built, so no request reaches outside the workspace;
only the page itself can change the workspace (`only_the_page`).

This module holds the routes; what they do is whoqa.web.books.Library (books, cast, answers) and
whoqa.web.uploads (jobs), guarded by whoqa.web.guard (body limits, Host names), errors by whoqa.web.errors.
"""
from __future__ import annotations

import logging
import uuid
from pathlib import Path

from fastapi import FastAPI, File, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from whoqa.core.errors import DataError
from whoqa.retrieval.lucene import MissingPackage
from whoqa.web.books import Library
from whoqa.web.config import ServeConfig
from whoqa.web.errors import ApiError, expected_status, one_line
from whoqa.web.guard import LOOPBACK, BodyLimit, _ip_literal, allowed_hosts, host_name, over_limit, size

__all__ = ["ApiError", "LOOPBACK", "Library", "ServeConfig", "create_app", "expected_status", "host_name",
           "one_line", "serve", "size"]
log = logging.getLogger(__name__)
PAGE = Path(__file__).with_name("page.html")


class AskRequest(BaseModel):
    question: str
    route: str = "auto"  # as `whoqa ask --route`
    upto: str | None = None  # as `whoqa ask --upto`: "40%" or "Chapter 12", no spoilers after it
    html: bool = False  # the page's: the answer also drawn as HTML ("html", whoqa.answer_view.as_html)


def create_app(cfg: ServeConfig) -> FastAPI:
    """The FastAPI application of a workspace (uvicorn serves it; tests call it directly)."""
    service = Library(cfg)
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
        from whoqa.core.text import ACCEPT  # (the one table of book formats: the file picker offers its own)
        return HTMLResponse(PAGE.read_text(encoding="utf-8").replace("{{accept}}", ACCEPT))

    @app.get("/api/books")
    def list_books() -> list[dict]:
        return service.books()

    @app.post("/api/books", status_code=202)
    async def upload(file: UploadFile = File(...)) -> dict:
        limit = int(cfg.max_upload_mb * 1e6)
        data = await file.read(limit + 1)  # (one byte past the limit tells it is over, not by how much)
        name = Path(file.filename or "book.txt").name
        if len(data) > limit and not cfg.read_only:  # (read-only: the service's 403 says uploads are off)
            raise ApiError(413, over_limit(name, file.size, limit))
        return service.upload(name, data)

    @app.get("/api/jobs/{job_id}")
    def job(job_id: str) -> dict:
        return service.job(job_id)

    @app.get("/api/progress")
    def progress() -> dict:
        return service.progress()

    @app.get("/api/books/{book_id}")
    def book(book_id: str, upto: str | None = None) -> dict:
        """With ?upto= ("40%", "Chapter 12"), the cast as of that point (no spoilers) and where it is cut ("upto")."""
        cast = service.characters(book_id, upto)
        out = {**service.summary(book_id), "cast": cast[:50], "characters": len(cast)}  # (the people counted, read so far)
        return {**out, "upto": service.cut(book_id, upto)} if upto else out

    @app.get("/api/books/{book_id}/characters")
    def characters(book_id: str, upto: str | None = None) -> list[dict]:
        return service.characters(book_id, upto)

    @app.get("/api/books/{book_id}/characters/{char_id}")
    def character(book_id: str, char_id: int, upto: str | None = None) -> dict:
        out = service.character(book_id, char_id, upto=upto)
        return {**out, "upto": service.cut(book_id, upto)} if upto else out

    @app.post("/api/books/{book_id}/ask")
    def ask(book_id: str, q: AskRequest) -> dict:
        return service.ask(book_id, q.question, q.route, q.upto, q.html)

    return app


def serve(cfg: ServeConfig) -> None:
    import uvicorn
    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving on %s: anyone who can reach this address can read the workspace%s", cfg.host,
                    "" if cfg.read_only else " and upload books (--read-only turns uploads off)")
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level="warning")
