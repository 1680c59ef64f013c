"""Kindle books (MOBI, AZW, AZW3; without DRM): unpacked by the `mobi` package (KindleUnpack) into the EPUB (KF8) or
HTML (MOBI 7) they carry, then read as whoqa reads those, so a Kindle file and its EPUB are one book's text. A
DRM-protected or damaged file is one DataError line before anything is written."""
from __future__ import annotations

import shutil
from pathlib import Path

from whoqa.core.errors import DataError

KINDLE_SUFFIXES = (".mobi", ".azw", ".azw3", ".kf8", ".prc")


def is_kindle(head: bytes) -> bool:
    """Whether a file's first bytes are a Kindle book's (a Palm database of type BOOKMOBI or TEXtREAd)."""
    return head[60:68] in (b"BOOKMOBI", b"TEXtREAd")


def read_kindle(path: Path) -> str:
    """A Kindle book's text in reading order (module docstring)."""
    from whoqa.core.epub import read_epub, read_html
    from whoqa.core.pdf import read_pdf
    path = Path(path)
    if not is_kindle(path.read_bytes()[:78]):
        raise DataError(f"{path} is not a Kindle book (no MOBI header): give a .mobi/.azw3 file without DRM, or the "
                        f"book as EPUB or plain text")
    try:
        import logging
        from loguru import logger
        from mobi import extract
        logger.remove()  # (KindleUnpack's progress lines are not the user's business)
        logging.getLogger("mobi").setLevel(logging.ERROR)
    except ImportError:
        raise DataError("reading Kindle files needs the `mobi` package: `pip install mobi` (install.sh installs it)") \
            from None
    import contextlib
    import io
    tempdir = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # (it prints as it unpacks)
            tempdir, unpacked = extract(str(path))
        unpacked = Path(unpacked)
        reader = {".epub": read_epub, ".pdf": read_pdf}.get(unpacked.suffix.lower(), read_html)
        return reader(unpacked)
    except DataError as e:
        raise DataError(f"{path}: {e}".replace(str(unpacked), "its text") if tempdir else str(e)) from None
    except Exception as e:  # noqa: BLE001 (KindleUnpack raises plain exceptions of every kind)
        if "encrypted" in str(e).lower():
            raise DataError(f"{path} is DRM-protected: whoqa reads only Kindle books without DRM (or export the book "
                            f"as EPUB or text)") from None
        raise DataError(f"{path} is a damaged Kindle book ({type(e).__name__}: {str(e)[:120]}): export it again, or "
                        f"give the book as EPUB or plain text") from None
    finally:
        if tempdir:
            shutil.rmtree(tempdir, ignore_errors=True)
