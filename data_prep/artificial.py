"""Artificial Who questions from dependency rules (Angelidis et al. 2019, §3.4 and Figure 2).

From every sentence where a character mention is the agent (nsubj) or the patient (dobj) of an active verb, or the
patient (nsubjpass) of a passive one, the dependency tree is pruned to the verb with its auxiliaries, negation and
particles, the other core arguments (object, dative, subject) and the prepositional phrases on the verb, each phrase
kept as its head with a normalised determiner ("a/an" for indefinite ones; "the" kept on objects, dropped in
prepositional phrases) and one level of prepositional modifiers; "Who" takes the answer's place, the verb order is
restored (do-support for object questions), and a "?" ends it:
    "Marriat had a gift for the invention of stories." -> "Who had a gift for invention?"      (Marriat)
    "Hermione was attacked by another spell."          -> "Who was attacked by a spell?"       (Hermione)
Each question's context is the 20 sentences up to and including its source sentence.

Per book, WS/artificial/<id>.jsonl.gz holds one JSON object per question:
    {"q": tokens (character mentions as CHAR_<id>), "t": text, "a": answer character id, "s": sentence id,
     "c": [first, last] context sentence ids, "k": "agent" | "patient"}
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.book import Book, Token, char_token, span_head
from whoqa.core.workspace import Workspace
from whoqa.core.seed import SEED
from data_prep.coref import quote_ids
from whoqa.core.store import read_artificial
import random

INDEFINITE = {"a", "an", "another", "some", "any", "one", "each", "every", "either"}
DEFINITE = {"the", "this", "that", "these", "those"}
CONTENT_POS = {"NOUN", "PROPN", "ADJ", "NUM"}
FIRST_SECOND = {"i", "you", "we", "they"}
CONTEXT = 20
SKIP_NO_CONTENT, SKIP_ANSWER_IN_QUESTION = "no content word besides the verb", "answer mentioned in the question"
SKIP_RELATIVE = "relative clause without its own object"


@dataclass
class Phrase:
    words: list[str] = field(default_factory=list)  # surface text
    tokens: list[str] = field(default_factory=list)  # character mentions as CHAR_<id>
    positions: list[int] = field(default_factory=list)  # where each word stood (for ordering)
    chars: set = field(default_factory=set)
    content: bool = False

    def add(self, word: str, token: str, pos: int, content: bool = False, char: int | None = None):
        self.words.append(word)
        self.tokens.append(token)
        self.positions.append(pos)
        self.content |= content
        if char is not None:
            self.chars.add(char)

    def extend(self, other: "Phrase"):
        for w, t, p in zip(other.words, other.tokens, other.positions):
            self.add(w, t, p)
        self.chars |= other.chars
        self.content |= other.content


class Generator:
    def __init__(self, book: Book):
        self.b = book
        self.toks = book.tokens
        self.children: dict[int, list[int]] = {}
        for t in self.toks:
            if t.head != t.index:
                self.children.setdefault(t.head, []).append(t.index)
        self.mention_at: dict[int, tuple[int, int, int]] = {}  # head token -> (start, end, char)
        for m in book.mentions:
            self.mention_at[span_head(self.toks, m.start, m.end)] = (m.start, m.end, m.char_id)
        self.stats = Counter()
        self.qids = quote_ids(self.toks)

    def w(self, i: int) -> str:
        """A word as it reads mid-question: a sentence-initial capital is lowered unless it is a name."""
        t = self.toks[i]
        if t.index == self.b.sentences[t.sentence][0] and t.pos != "PROPN" and t.word != "I":
            return t.word[:1].lower() + t.word[1:]
        return t.word

    def kids(self, i: int, *deps: str) -> list[int]:
        return [k for k in self.children.get(i, []) if self.toks[k].dep in deps]

    def subjects(self, v: int) -> list[int]:
        """Subjects of a verb, conjoined subjects included; a conjoined verb borrows its head verb's."""
        subj = self.kids(v, "nsubj", "nsubjpass")
        t = self.toks[v]
        head = self.toks[t.head]
        if not subj and t.dep == "conj" and head.pos in ("VERB", "AUX") and not (t.tag == "VB" and head.tag != "VB"):
            subj = self.subjects(t.head)  # "Holmes rose and left", but not "I say ..., give up this attempt"
        out = []
        for s in subj:
            for x in [s] + self.kids(s, "conj"):
                if x not in out:
                    out.append(x)
        return out

    def np(self, i: int, keep_definite: bool, with_pp: bool = True) -> Phrase:
        """A noun phrase pruned to its head (or whole character mention) with a normalised determiner."""
        p = Phrase()
        t = self.toks[i]
        if i in self.mention_at:
            s, e, c = self.mention_at[i]
            p.add(" ".join(x.word for x in self.toks[s:e + 1]), char_token(c), s, True, c)
            return p
        det = self.kids(i, "det")
        if det:
            d = self.toks[det[0]].word.lower()
            if d in INDEFINITE:
                p.add("an" if t.word[:1].lower() in "aeiou" else "a", "a", det[0])
            elif d in DEFINITE and keep_definite:
                p.add("the", "the", det[0])
            elif d in ("no", "neither"):  # "had no sorrow" must not become "had sorrow"
                p.add(d, d, det[0], True)
        for c in self.kids(i, "compound"):
            if any(ch.isalnum() for ch in self.toks[c].word):
                p.add(self.w(c), self.toks[c].word, c, self.toks[c].pos in CONTENT_POS)
        p.add(self.w(i), t.word, i, t.pos in CONTENT_POS)
        if with_pp:
            for prep in self.kids(i, "prep"):
                p.extend(self.pp(prep))
        return p

    def pp(self, prep: int) -> Phrase:
        p = Phrase()
        objs = self.kids(prep, "pobj")
        if objs:
            p.add(self.w(prep), self.toks[prep].word.lower(), prep)
            p.extend(self.np(objs[0], keep_definite=False, with_pp=False))
        return p

    def questions(self):
        for v, t in enumerate(self.toks):
            if t.pos != "VERB":
                continue
            if t.dep == "relcl" and not self.kids(v, "dobj"):
                self.stats[SKIP_RELATIVE] += 1  # "the room he had taken": its object is the noun outside
                continue
            for s in self.subjects(v):
                if s in self.mention_at:
                    yield from self._emit(v, s, "agent" if self.toks[s].dep != "nsubjpass" and
                                          not self._passive(v) else "patient")
            for o in self.kids(v, "dobj"):
                if o in self.mention_at and not self._passive(v):
                    yield from self._emit(v, o, "patient")

    def _passive(self, v: int) -> bool:
        return bool(self.kids(v, "auxpass", "nsubjpass"))

    def _emit(self, v: int, ans: int, kind: str):
        toks = self.toks
        answer_char = self.mention_at[ans][2]
        verb = toks[v]
        aux = self.kids(v, "aux", "auxpass")
        neg = self.kids(v, "neg")
        prt = self.kids(v, "prt")
        body = Phrase()  # everything after the verb group
        for d in self.kids(v, "dative", "dobj"):
            if d != ans:
                body.extend(self.pp(d) if toks[d].pos == "ADP" else self.np(d, keep_definite=True))
        for prep in self.kids(v, "prep", "agent"):
            body.extend(self.pp(prep))
        for x in prt:
            body.add(toks[x].word, toks[x].word.lower(), x)
        for x in self.kids(v, "xcomp"):  # "wanted to leave the castle"
            if toks[x].pos == "VERB":
                for a in self.kids(x, "aux", "neg"):
                    body.add(toks[a].word, toks[a].word.lower(), a)
                body.add(toks[x].word, toks[x].word.lower(), x, True)
                for d in self.kids(x, "dobj", "dative"):
                    body.extend(self.np(d, keep_definite=True))
                for prep in self.kids(x, "prep"):
                    body.extend(self.pp(prep))
        q = Phrase()
        q.add("Who", "who", -1)
        if toks[ans].dep == "dobj":  # object question: Who [aux|do] SUBJ [neg] VERB ...?
            subj = [s for s in self.subjects(v) if s != ans]
            if not subj:
                return
            sp = self.np(subj[0], keep_definite=True, with_pp=False)
            if aux:
                first, rest = aux[0], aux[1:]
                q.add(toks[first].word.lower(), toks[first].word.lower(), first)
                q.extend(sp)
                for a in rest + neg:
                    q.add(toks[a].word, toks[a].word.lower(), a)
                q.add(verb.word, verb.word.lower(), v)
            else:
                do = {"VBD": "did", "VBZ": "does"}.get(verb.tag, "do")
                q.add(do, do, v)
                q.extend(sp)
                for a in neg:
                    q.add(toks[a].word, toks[a].word.lower(), a)
                q.add(verb.lemma, verb.lemma.lower(), v)
            q.content |= sp.content
        else:  # subject question: Who [aux] [neg] VERB ...?
            third = toks[ans].word.lower() in FIRST_SECOND
            group = sorted(aux + neg) + [v]
            for k, a in enumerate(group):
                w = toks[a].word
                if third and k == 0:
                    w = _third_person(toks[a])
                q.add(w, w.lower(), a)
        # words from inside a quotation when the verb is outside (or the reverse) belong to another voice
        inside = self.qids[v] >= 0
        keep = [k for k, p in enumerate(body.positions) if (self.qids[p] >= 0) == inside]
        # a phrase fronted before the verb ("At present I will take you") goes to the end
        tail = sorted(((body.positions[k] + (len(toks) if body.positions[k] < v else 0), body.positions[k],
                        body.words[k], body.tokens[k]) for k in keep))
        for _, p, w, t in tail:
            q.add(w, t, p)
        q.chars |= body.chars
        q.content |= body.content
        if not q.content:
            self.stats[SKIP_NO_CONTENT] += 1
            return
        if answer_char in q.chars:
            self.stats[SKIP_ANSWER_IN_QUESTION] += 1
            return
        self.stats["questions"] += 1
        sid = verb.sentence
        yield {"q": q.tokens + ["?"], "t": " ".join(q.words) + "?", "a": answer_char, "s": sid,
               "c": [max(0, sid - CONTEXT + 1), sid], "k": kind}



def _third_person(t: Token) -> str:
    """'I hate' -> 'Who hates', 'we were' -> 'Who was': the answer is now a third-person singular subject."""
    w = t.word.lower()
    fixed = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "'m": "is", "'re": "is",
             "'ve": "has"}
    if w in fixed:
        return fixed[w]
    if t.tag != "VBP":
        return t.word
    lemma = t.lemma.lower()
    if lemma.endswith(("s", "x", "z", "ch", "sh", "o")):
        return lemma + "es"
    if lemma.endswith("y") and len(lemma) > 1 and lemma[-2] not in "aeiou":
        return lemma[:-1] + "ies"
    return lemma + "s"


def generate(book: Book) -> tuple[list[dict], Counter]:
    g = Generator(book)
    qs = list(g.questions())
    return qs, g.stats


def sample(workspace: Path, n: int = 50, seed: int = SEED) -> list[str]:
    """n random artificial questions, each with its answer's name and source sentence."""
    folder = Workspace(workspace).artificial
    files = sorted(folder.glob("*.jsonl.gz"))
    if not files:
        raise FileNotFoundError(f"no artificial questions in {folder}: run `whoqa prepare --workspace {workspace}`")
    rng = random.Random(seed)
    pool = [(f.name[:-len(".jsonl.gz")], q) for f in files for q in read_artificial(f)]
    lines = []
    books: dict[str, Book] = {}
    for bid, q in rng.sample(pool, min(n, len(pool))):
        if bid not in books:
            books[bid] = Book.load(Workspace(workspace).books / bid, bid)
        b = books[bid]
        name = b.characters[q["a"]].name if q["a"] in b.characters else f"CHAR_{q['a']}"
        lines.append(f"{q['t']}  ->  {name}\n    source: {' '.join(b.sentence_words(q['s']))}")
    return lines
