"""The one renderer of an answer (whoqa.service.Answer) for people: as text for a terminal (`whoqa ask`, `whoqa
chat`), as the web page's JSON (`whoqa serve`: Answer.to_json with each sentence's segments, so the page highlights
and links every mention) and as the HTML the page shows (as_html, which the page asks for with "html": true). The
words people read about an answer, on the terminal or the page, are all here.

Also what makes a book's text safe to show (`shown`: control characters and bidirectional overrides escaped) and a
sentence as segments for highlighting (`sentence_segments`)."""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import typer

from whoqa.core.book import Book

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def shown(text) -> str:
    """Text from a book (or a file name) made safe for the terminal: control characters, escape sequences among them,
    and bidirectional overrides shown as \\xNN / \\uNNNN instead of acting on the terminal; a file name's byte that
    is not UTF-8 (Python's surrogate escape, "\\udcff") as the byte it is, \\xff."""
    return CONTROL.sub(_escaped, str(text))


def _escaped(m: re.Match) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def marked(text: str, marks: list) -> str:
    """text from a book with the character ranges `marks` in bold and underlined (on a terminal); everything through
    `shown`, so its escape sequences never act."""
    out, last = "", 0
    for a, b in marks:
        out += shown(text[last:a]) + typer.style(shown(text[a:b]), bold=True, underline=True)
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
    """The answer and one sureness figure, explained once: "Most likely Helen (21% sure: answers this sure are right
    about 1 time in 5)"; no word that calls a right answer a guess."""
    p = top.probability
    if p is None:
        return f"Most likely {top.name} (no probability: none was measured for this model on such a book)"
    odds = ("nearly always" if p >= 0.95 else f"about {round(10 * p)} times in 10" if p >= 0.5 else
            f"about 1 time in {max(2, round(1 / max(p, 1e-3)))}")
    return f"Most likely {top.name} ({p:.0%} sure: answers this sure are right {odds})"


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


def as_html(doc: dict, book_id: str) -> str:
    """The page's answer block (for_page's document as HTML), in a reader's words as the terminal's: the answer and how
    sure (`headline`), the ranked characters with their probability bars and the evidence, each mention highlighted
    (a legend says how) and linked to its character, or the reader's answer with the sentences it rests on. What
    answered and how (route, model, runtime, calibration, support) only under "Details". Everything from the book is
    escaped."""
    up = doc.get("upto")
    warn = "".join(f'<p class="warn">{esc(w)}</p>' for w in doc.get("warnings") or []) + (
        f'<p class="muted" id="upto-note">From the book up to {esc(up["spec"])}: its first {up["sentences"]:,} of '
        f'{up["of"]:,} sentences.</p>' if up else "")
    reasons = f'<p id="why">Why: {esc("; ".join(doc["why"]))}.</p>' if doc.get("why") else ""
    if doc["kind"] == "reader":  # the answer with the sentences it rests on, or that it was not found
        grounds = "".join(f'<li>{html_marked(g["text"], g.get("marks"))}</li>' for g in doc.get("grounds") or [])
        head = ('<p id="reader-answer" class="warn">whoqa did not find the answer in the book.</p><h4>The best '
                'passages it found</h4>' if doc.get("found") is False else
                f'<p id="reader-answer"><b>{esc(doc["answer"])}</b></p>{reasons}<h4>Where the book says so</h4>')
        legend = ('<p class="muted legend"><mark class="m">marked</mark> words the answer shares with the book</p>'
                  if grounds and doc.get("found") is not False else "")
        return (warn + head + f'<ul id="grounds">{grounds or NO_PASSAGE}</ul>{legend}'
                + "<details><summary>The passages it read</summary>"
                + "".join(f'<p class="muted">{prose(p)}</p>' for p in doc["passages"]) + "</details>" + details(doc))
    chars = doc["characters"]
    rows = "".join(f'<tr><td><a href="#/book/{book_id}/char/{c["id"]}">{esc(c["name"])}</a></td><td>' + (
        "" if c["probability"] is None else f'<span class="bar" style="width:{int(200 * c["probability"] + 0.5)}px">'
                                            f'</span> {100 * c["probability"]:.1f}%') + "</td></tr>" for c in chars)
    hits = {c["id"] for c in chars[:1]}
    evidence = "".join(f"<li>{html_segments(e['segments'], book_id, hits)}</li>" for e in doc["evidence"])
    attention = "".join(f"<li>{html_segments(e['segments'], book_id, hits)} <span class=\"muted\">(attention "
                        f"{e['attention']:.2f})</span></li>" for e in doc.get("attention") or [])
    top = chars[0] if chars else None
    lead = (f'<p id="headline"><b>{esc(headline(_Top(top["name"], top["probability"])))}</b></p>' if top else "")
    legend = (f'<p class="muted legend"><mark class="m hit">{esc(top["name"]) if top else "the answer"}</mark> the '
              f'answer\'s mentions · <mark class="m">other people</mark> another character\'s (click one for that '
              f'character)</p>' if evidence else "")
    return (warn + lead + f'<table id="ranking">{rows}</table>{reasons}'
            + f"<h4>Evidence: where the question's context mentions {esc(top['name']) if top else 'the answer'}"
            + f'</h4><ul id="evidence">{evidence or NO_EVIDENCE}</ul>{legend}'
            + (f"<details><summary>The network's attention (the sentences it attended to most)</summary>"
               f'<ul id="attention">{attention}</ul></details>' if attention else "") + details(doc))


@dataclass
class _Top:  # (the top character as `headline` reads it, from the page's document)
    name: str
    probability: float | None


def details(doc: dict) -> str:
    """What answered and how, for those who want it, behind a "Details" toggle: the route and its reason, the model
    and runtime, where the probabilities' scale comes from (ECE), each ground's support."""
    cal = doc.get("calibration") or {}
    how = (f"probabilities at a temperature fit on held-out folds (ECE {cal['ece']:.3f})"
           if cal.get("temperature") is not None else
           f"probabilities by {esc(cal['by'])}" + (f" (cross-validated ECE {cal['ece']:.3f})"
                                                   if cal.get("ece") is not None else "") if cal.get("by") else "")
    support = "".join(f'<li>support {g["support"]:.2f}: {esc(g["text"][:80])}…</li>' for g in doc.get("grounds") or []
                      if g.get("support") is not None)
    withheld = (f'<p>The reader wrote {esc(repr(doc["withheld"]))}, which no sentence it read holds.</p>'
                if doc.get("withheld") else "")
    return (f'<details id="details"><summary>Details</summary><p class="muted" id="route">Answered by '
            f'<b>{esc(doc["model"])}</b> (route <b>{esc(doc["route"])}</b>): {esc(doc["reason"])}'
            f'{"; " + how if how else ""}.</p>{withheld}' + (f'<ul class="muted">{support}</ul>' if support else "")
            + f'<p class="muted">{doc.get("seconds", 0):.1f} s</p></details>')


NO_PASSAGE = '<li class="muted">no passage</li>'
NO_EVIDENCE = '<li class="muted">none of the context\'s sentences mentions it</li>'


def esc(text) -> str:
    """Text escaped for HTML (as the page's esc)."""
    return html.escape(str(text), quote=True)


ITALIC = re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")  # Gutenberg's _italics_ ("snake_case" is not)


def prose(text) -> str:
    """Book text for the page: escaped, Gutenberg's _italics_ as italics."""
    return ITALIC.sub(r"<i>\1</i>", esc(text))


def html_marked(text: str, marks) -> str:
    """text with the [start, end) ranges in marks highlighted."""
    out, last = "", 0
    for a, b in marks or []:
        out += prose(text[last:a]) + f'<mark class="m">{prose(text[a:b])}</mark>'
        last = b
    return out + prose(text[last:])


def html_segments(segments: list[dict], book_id: str, hits: set) -> str:
    """A sentence's segments with each mention highlighted (the answer's as a hit) and linked to its character."""
    return "".join(prose(s["text"]) if s["char"] is None else
                   f'<mark class="m{" hit" if s["char"] in hits else ""}" data-char="{s["char"]}"><a href="#/book/'
                   f'{book_id}/char/{s["char"]}">{prose(s["text"])}</a></mark>' for s in segments)
