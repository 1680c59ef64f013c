"""What guards the server: request bodies over their limit refused while they arrive (BodyLimit), and the Host
names a request may carry (allowed_hosts: no DNS rebinding)."""
from __future__ import annotations

import ipaddress
import logging

from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from whoqa.web.config import ServeConfig

log = logging.getLogger(__name__)


def size(n: float) -> str:
    """A byte count as a person reads it: 850 bytes, 12.3 kB, 4.56 MB."""
    n = float(n)
    if n < 1000:
        return f"{n:.0f} bytes"
    if n < 1e6:
        return f"{n / 1e3:.3g} kB"
    return f"{n / 1e6:.3g} MB"


def over_limit(name: str, known: int | None, limit: float) -> str:
    """The 413 of a book file over its limit: its size where known and shown above the limit's (a read cut at the
    limit would show the limit itself: "30 kB: the limit is 30 kB"), else only that it is over."""
    if known is not None and known > limit and size(known) != size(limit):
        return f"{name} is {size(known)}: the limit is {size(limit)} (whoqa serve --max-upload-mb)"
    return f"{name} is over the limit of {size(limit)} (whoqa serve --max-upload-mb)"


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
