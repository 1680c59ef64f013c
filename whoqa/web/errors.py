"""The API's errors: what the CLI says in one line is a 4xx with that line; anything else is a bug (500)."""
from __future__ import annotations

from whoqa.core.errors import DataError
from whoqa.core.disk import FULL_OR_READ_ONLY, disk_error
from whoqa.retrieval.lucene import MissingPackage


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def one_line(e: Exception) -> str:
    """An expected error as one line: its own message, or for the disk's errors what is wrong and what to do (never
    a raw "[Errno 30] Read-only file system"; whoqa.core.disk)."""
    return disk_error(e, served=True) or (str(e).splitlines()[0] if str(e) else type(e).__name__)


def expected_status(e: Exception) -> int | None:
    """The HTTP status of an error the user can act on (as the CLI's one-line errors), None for a bug."""
    if isinstance(e, MissingPackage):
        return 503  # the server lacks a package: the message says how to install it
    if isinstance(e, FileNotFoundError):
        return 409  # the workspace lacks a stage, a model or a file: the message says which command makes it
    if isinstance(e, (ValueError, DataError, UnicodeError)):
        return 400
    if isinstance(e, PermissionError) or isinstance(e, OSError) and e.errno in FULL_OR_READ_ONLY:
        return 507
    return None
