"""The disk's errors (full, over quota, read-only, not ours to write) as one line a person can act on, never a raw
"[Errno 30] Read-only file system": one table for the command line and the web server, each told what to do in its
own words (the CLI's reader can pass --workspace; the server's operator can serve with --read-only)."""
from __future__ import annotations

import errno

# errno -> (what the command line says to do, what the server says to do; None: not a disk error the server names)
_ADVICE = {
    errno.ENOSPC: ("free some space (or point --workspace at a disk with room) and run the command again: it resumes "
                   "where it stopped", "the disk is full: free some space"),
    errno.EDQUOT: ("free some of your quota and run the command again: it resumes where it stopped", None),
    errno.EROFS: ("the workspace is on a read-only disk: copy it somewhere writable (or serve it with "
                  "`whoqa serve --read-only`)", "the workspace is on a read-only disk: serve it with "
                                                "`whoqa serve --read-only`"),
    errno.EACCES: ("the workspace is not writable by you: use a workspace of your own (--workspace)",
                   "the workspace is not writable by the server's user"),
    errno.EPERM: ("the workspace is not writable by you: use a workspace of your own (--workspace)",
                  "the workspace is not writable by the server's user"),
}
FULL_OR_READ_ONLY = (errno.ENOSPC, errno.EROFS)  # what the server answers with 507 (Insufficient Storage)


def disk_error(e: BaseException, served: bool = False) -> str | None:
    """One line for an OSError of the disk ("PATH: STRERROR: what to do"), for the command line or (served) the web
    server; None for any other error, a missing file among them (FileNotFoundError is the data's, not the disk's)."""
    if not isinstance(e, OSError) or isinstance(e, FileNotFoundError) or e.errno not in _ADVICE:
        return None
    advice = _ADVICE[e.errno][1 if served else 0]
    return f"{e.filename or 'the workspace'}: {e.strerror}: {advice}" if advice else None
