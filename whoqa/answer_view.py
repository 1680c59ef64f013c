"""The one renderer of an answer (whoqa.service.Answer) for people: as text for a terminal (`whoqa ask`, `whoqa
chat`) and as the JSON the web page draws (`whoqa serve`: Answer.to_json with each sentence's segments, so the page
highlights and links every mention). The page's HTML is drawn by page.html from that JSON alone (it uses only the
API); the words people read on the terminal are all here.

Also what makes a book's text safe to show (`shown`: control characters and bidirectional overrides escaped) and a
sentence as segments for highlighting (`sentence_segments`)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import click

from whoqa.core.book import Book

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text) -> str:
    """Text from a book (or a file name) made safe for the terminal: control characters, escape sequences among them,
    and bidirectional overrides shown as \\xNN / \\uNNNN instead of acting on the terminal."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                       str(text))


def marked(text: str, marks: list) -> str:
    """text from a book with the character ranges `marks` in bold and underlined (on a terminal); everything through
    `shown`, so its escape sequences never act."""
    out, last = "", 0
    for a, b in marks:
        out += shown(text[last:a]) + click.style(shown(text[a:b]), bold=True, underline=True)
        last = b
    return out + shown(text[last:])


@dataclass
class Line:
    """A line of an answer on the terminal: on stdout, or on stderr (err), in a colour (warnings: yellow)."""
    text: str
    err: bool = False
    color: str | None = None


def as_json(ans) -> str:
    """The answer as JSON (Answer.to_json: the web API's schema), as `ask --json` prints it and `--out` writes it."""
    return json.dumps(ans.to_json(), indent=1)


def as_text(ans, verbose: bool = False, source: Path | None = None) -> list[Line]:
    """An Answer for a person: one block on stdout (the answer, how sure, why, the passages that show it); warnings on
    stderr; the internals (route and reason, calibration, the LLM's share) on stderr when verbose; source: the book
    file it was asked of (named with --verbose)."""
    out = internals(ans, source) if verbose else []
    out += [Line(f"warning: {shown(w)}", err=True, color="yellow") for w in ans.warnings]
    if ans.upto:
        out.append(Line(f"(from the book up to {ans.upto['spec']}: its first {ans.upto['sentences']:,} of "
                        f"{ans.upto['of']:,} sentences, {ans.upto['sentences'] / ans.upto['of']:.0%})"))
    if ans.kind == "reader":
        if ans.found is False:
            out.append(Line("whoqa did not find the answer in the book. The best passages it found:"))
            if verbose:
                out.append(Line(f"(the reader's answer {shown(repr(ans.withheld))} is in no sentence of them: support "
                                f"{ans.support:.2f})", err=True))
        else:
            out.append(Line(shown(ans.answer)))
            if ans.why:
                out.append(Line(f"Why: {shown('; '.join(ans.why))}."))
        out += [Line(f"  | {marked(e.text, e.marks)}") for e in ans.grounds]  # the words shared with the answer bold
        if not ans.grounds:
            for p in ans.passages[:3]:
                p = book_quotes(p)
                out.append(Line(f"  | {shown(p[:300])}{'...' if len(p) > 300 else ''}"))
        return out
    if ans.characters:
        out.append(Line(shown(headline(ans.characters[0]))))
    for i, c in enumerate(ans.characters, 1):
        name = shown(c.name)
        out.append(Line((f"{c.probability:6.1%}  {name}" if c.probability is not None else f"{i:>5}.  {name}")
                        + (f"   (LLM {c.llm:.1%} of the names it read)" if verbose and c.llm is not None else "")))
    if ans.why:
        out.append(Line(f"Why: {shown('; '.join(ans.why))}."))
    out += [Line(f"  | {marked(e.text, e.marks)}") for e in ans.evidence]  # sentences that mention the answer
    out += [Line(f"  attention {e.attention:.2f}: {shown(e.text[:200])}") for e in (ans.attention if verbose else ())]
    return out


def book_quotes(text: str) -> str:
    """A passage's straight double quotes closed up as a book prints them ('" I want it. "' reads '"I want it."',
    taking them as opening and closing in turn): the passages keep the spacing the readers were trained on, the
    terminal shows prose."""
    parts = text.split('"')
    out = parts[0]
    for k, part in enumerate(parts[1:]):
        out = out + '"' + part.lstrip(" ") if k % 2 == 0 else out.rstrip(" ") + '"' + part
    return out


def headline(top) -> str:
    """The answer and how sure, in words: "Helen, though it is a guess: about 1 chance in 5"."""
    p = top.probability
    if p is None:
        return f"Most likely {top.name} (no probability: none was measured for this model on such a book)"
    odds = f"about {p:.0%} of the time" if p >= 0.5 else f"about 1 time in {max(2, round(1 / max(p, 1e-3)))}"
    sure = ("very likely" if p >= 0.8 else "likely" if p >= 0.6 else "a fair guess" if p >= 0.4 else
            "a guess" if p >= 0.15 else "a long shot")
    return f"Most likely {top.name}: {sure} (answers given this sure are right {odds})"


def internals(ans, source: Path | None) -> list[Line]:
    """The route, the model and why it was chosen, and where the probabilities' scale comes from (--verbose)."""
    out = [Line(f"book {ans.book} ({shown(source)})", err=True)] if source is not None else []
    out.append(Line(f"({ans.route}: {shown(ans.model)}; {shown(ans.reason)})", err=True))
    cal = ans.calibration or {}
    if "temperature" in cal:
        out.append(Line(f"(probabilities at temperature {cal['temperature']:.2f}, fit on the held-out folds of run "
                        f"{cal['run']}: ECE {cal['ece']:.3f})", err=True))
    elif cal.get("by"):
        out.append(Line(f"(probabilities by {cal['by']}: fit on {cal['questions']} questions of {cal['fit_of']}"
                        + (f", cross-validated ECE {cal['ece']:.3f}" if cal.get("ece") is not None else "") + ")",
                        err=True))
    out.append(Line(f"({ans.seconds:.1f} s)", err=True))
    return out


def for_page(ans, book: Book) -> dict:
    """The answer as the web page draws it: `whoqa ask --json`'s document, each evidence and attention sentence with
    its text segments (sentence_segments) for highlighting and links."""
    doc = ans.to_json()
    for e in doc["evidence"] + doc["attention"]:
        e["segments"] = sentence_segments(book, e["sentence"])
    return doc


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
