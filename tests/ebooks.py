"""Book files the tests make: a PDF written by fpdf2 (a real text layer, page numbers and a running head) and a Kindle
MOBI built here by the format's own layout (a Palm database: a MOBI 6 header record, then the HTML in uncompressed
4,096-byte text records), since no library writes MOBI."""
from __future__ import annotations

import struct
from pathlib import Path

NONE = 0xFFFFFFFF


def make_mobi(path: Path, html: str, title: str = "A Book", encrypted: bool = False) -> Path:
    """An unencrypted (or, with `encrypted`, a DRM-flagged) MOBI 6 book holding `html`."""
    text = html.encode("utf-8")
    chunks = [text[i:i + 4096] for i in range(0, len(text), 4096)] or [b""]
    name = title.encode("utf-8")
    mobi = bytearray(0xE8)  # the MOBI header, from its magic on
    mobi[0:4] = b"MOBI"
    fields = {0x04: 0xE8, 0x08: 2, 0x0C: 65001, 0x10: 0x1234, 0x14: 6, 0x68: 6}  # length, book, UTF-8, id, version
    for off in range(0x18, 0x40, 4):  # the dictionary and extra indexes: none
        fields[off] = NONE
    fields.update({0x40: len(chunks) + 1, 0x44: 16 + 0xE8, 0x48: len(name), 0x4C: 9, 0x5C: len(chunks) + 1,
                   0x60: 0, 0x64: 0, 0x70: 0, 0x98: NONE, 0x9C: 0, 0xA0: 0, 0xB8: 0, 0xBC: 1, 0xC0: NONE,
                   0xC4: 1, 0xD0: NONE, 0xD4: 0, 0xE4: NONE})
    for off, value in fields.items():
        if off + 4 <= len(mobi):
            struct.pack_into(">L", mobi, off, value)
    struct.pack_into(">HH", mobi, 0xB0, 1, len(chunks))  # first and last content record
    palmdoc = struct.pack(">HHLHHHH", 1, 0, len(text), len(chunks), 4096, 2 if encrypted else 0, 0)
    record0 = palmdoc + bytes(mobi) + name + b"\0\0"
    record0 += b"\0" * (-len(record0) % 4)
    records = [record0, *chunks, b"\xe9\x8e\r\n"]  # the end-of-file record
    header = bytearray(78)
    header[0:len(title[:31].encode())] = title[:31].encode()
    header[60:68] = b"BOOKMOBI"
    struct.pack_into(">H", header, 76, len(records))
    offset = 78 + 8 * len(records) + 2
    table = b""
    for i, r in enumerate(records):
        table += struct.pack(">LL", offset, 2 * i)
        offset += len(r)
    Path(path).write_bytes(bytes(header) + table + b"\0\0" + b"".join(records))
    return Path(path)


def make_pdf(path: Path, chapters: list[tuple[str, str]], running_head: str = "THE LIGHTHOUSE") -> Path:
    """A PDF of the chapters (heading, paragraphs split on blank lines), each page with a running head and a page
    number, as a printed book has."""
    from fpdf import FPDF

    class Book(FPDF):
        def header(self):
            self.set_font("Helvetica", size=9)
            self.cell(0, 8, running_head, align="C")
            self.ln(10)

        def footer(self):
            self.set_y(-15)
            self.set_font("Helvetica", size=9)
            self.cell(0, 10, str(self.page_no()), align="C")

    pdf = Book(format=(148, 210))  # (A5 in mm)
    pdf.set_auto_page_break(True, margin=20)
    for heading, body in chapters:
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=14)
        pdf.cell(0, 10, heading)
        pdf.ln(14)
        pdf.set_font("Helvetica", size=11)
        for para in body.split("\n\n"):
            pdf.multi_cell(0, 5.5, " ".join(para.split()))
            pdf.ln(3)
    pdf.output(str(path))
    return Path(path)
