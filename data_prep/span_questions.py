"""Artificial What/Where/When/Why questions whose answer is a span of the book, for the reader's answer lookup.

The Who questions of `data_prep.artificial` teach the reader to copy a *name*; most NarrativeQA questions ask for
something else ("What sport does Jimmy play?", "Where does Olenin go?"), so a reader pretrained on names alone learns
"copy = a name" and answers them with one. These questions come from the same dependency parses and the same pruning
(`Generator`), with a character as the subject of an active verb and the answer one of the verb's other arguments:
    "Marriat bought a small horse at the fair."         -> "What did Marriat buy at the fair?"   (a small horse)
    "Then Holmes went to the station."                  -> "Where did Holmes go?"                 (to the station)
    "She wept because her brother had left."            -> "Why did she weep?"                    (because her ...)
    "When the bell rang, Anne opened the door."         -> "When did Anne open the door?"         (when the bell rang)
The answer is the argument's whole subtree as the book spells it (at most `MAX_ANSWER` words, never crossing a
quotation mark), so it can always be copied from the source sentence.

Rows: {"q": question tokens (character mentions as CHAR_<id>), "t": text, "s": sentence id, "span": [first, last]
answer token ids, "k": "what" | "where" | "when" | "why"}; they are made on the fly (a pass over a parsed book takes
well under a second), not stored.
"""
from __future__ import annotations

from collections import Counter

from data_prep.artificial import CONTENT_POS, Generator, Phrase
from whoqa.core.book import Book

MAX_ANSWER = 12  # words
PLACE_PREPS = {"to", "into", "in", "at", "from", "towards", "toward", "onto", "inside", "near", "across", "through",
               "behind", "beside", "under", "over", "out"}
NOT_PLACES = {  # pobj heads after a place preposition that say when, how or why, not where
    "morning", "evening", "night", "day", "days", "afternoon", "time", "times", "moment", "minute", "minutes", "hour",
    "hours", "week", "weeks", "month", "months", "year", "years", "while", "instant", "way", "manner", "voice", "tone",
    "silence", "fact", "order", "case", "spite", "vain", "turn", "return", "addition", "truth", "reply", "answer",
    "hand", "hands", "arms", "eyes", "face", "head", "tears", "love", "fear", "despair", "surprise", "astonishment",
    "haste", "earnest", "particular", "general", "short", "all", "part", "mind", "sight", "view", "spite", "front",
    "course", "place", "rest", "length", "last", "first", "end", "one", "that", "this", "it", "which", "what"}
CONTRACTED = {"'ll": "will", "'d": "would", "'ve": "have", "'s": "has", "'m": "am", "'re": "are", "ca": "can",
              "wo": "will", "sha": "shall"}
TIME_MARKS = {"when", "after", "before", "until", "till", "while", "once"}
REASON_MARKS = {"because"}
SKIP_LONG, SKIP_QUOTE, SKIP_NOT_A_PLACE = "answer longer than MAX_ANSWER words", "answer crosses a quotation", \
    "place preposition with a non-place object"


class SpanGenerator(Generator):
    def span_questions(self):
        toks = self.toks
        for v, t in enumerate(toks):
            if t.pos != "VERB" or t.dep in ("relcl", "acl", "amod") or self._passive(v):
                continue
            subj = [s for s in self.kids(v, "nsubj") if s in self.mention_at]
            if not subj:
                continue
            for o in self.kids(v, "dobj"):
                if o not in self.mention_at and toks[o].pos in ("NOUN", "PROPN"):
                    yield from self._emit_span(v, subj[0], o, "what")
            for p in self.kids(v, "prep"):
                objs = self.kids(p, "pobj")
                if toks[p].word.lower() in PLACE_PREPS and objs and objs[0] not in self.mention_at \
                        and toks[objs[0]].pos in ("NOUN", "PROPN"):
                    if toks[objs[0]].word.lower() in NOT_PLACES or toks[objs[0]].lemma.lower() in NOT_PLACES:
                        self.stats[SKIP_NOT_A_PLACE] += 1
                        continue
                    yield from self._emit_span(v, subj[0], p, "where")
            for c in self.kids(v, "advcl"):
                marks = {toks[m].word.lower() for m in self.kids(c, "mark", "advmod") if m < c}
                kind = "why" if marks & REASON_MARKS else "when" if marks & TIME_MARKS else None
                if kind and toks[c].pos in ("VERB", "AUX"):
                    yield from self._emit_span(v, subj[0], c, kind)

    def subtree(self, i: int) -> tuple[int, int]:
        """(first, last) token of i's subtree: spaCy's subtrees of a projective parse are contiguous."""
        lo = hi = i
        stack = [i]
        while stack:
            k = stack.pop()
            lo, hi = min(lo, k), max(hi, k)
            stack += self.children.get(k, [])
        return lo, hi

    def _emit_span(self, v: int, s: int, ans: int, kind: str):
        toks = self.toks
        lo, hi = self.subtree(ans)
        if kind in ("why", "when"):  # the clause with its marker, not what the main clause left to it
            lo = min([lo] + [m for m in self.kids(ans, "mark", "advmod") if m < ans])
        while hi > lo and toks[hi].pos == "PUNCT":
            hi -= 1
        while lo < hi and toks[lo].pos in ("PUNCT", "CCONJ"):
            lo += 1
        if hi - lo + 1 > MAX_ANSWER:
            self.stats[SKIP_LONG] += 1
            return
        if len({self.qids[i] for i in range(lo, hi + 1)} | {self.qids[v]}) > 1:
            self.stats[SKIP_QUOTE] += 1
            return
        if not any(toks[i].pos in CONTENT_POS or toks[i].pos == "VERB" for i in range(lo, hi + 1)):
            return
        verb = toks[v]
        aux = self.kids(v, "aux")
        neg = self.kids(v, "neg")
        q = Phrase()
        q.add(kind.capitalize(), kind, -1)
        sp = self.np(s, keep_definite=True, with_pp=False)
        if aux:
            first = CONTRACTED.get(toks[aux[0]].word.lower(), toks[aux[0]].word.lower())
            q.add(first, first, aux[0])
            q.extend(sp)
            for a in aux[1:] + neg:
                w = "not" if toks[a].word.lower() == "n't" else toks[a].word
                q.add(w, w.lower(), a)
            q.add(verb.word, verb.word.lower(), v)
        else:
            do = {"VBD": "did", "VBZ": "does"}.get(verb.tag, "do" if verb.tag == "VBP" else None)
            if do is None:  # a participle or infinitive without its auxiliary: no tense to ask in
                return
            q.add(do, do, v)
            q.extend(sp)
            for a in neg:
                q.add("not" if toks[a].word.lower() == "n't" else toks[a].word, "not", a)
            q.add(verb.lemma, verb.lemma.lower(), v)
        body = Phrase()  # the verb's other arguments, in book order, without the answer
        for x in self.kids(v, "prt"):
            body.add(toks[x].word, toks[x].word.lower(), x)
        for d in self.kids(v, "dative", "dobj"):
            if not lo <= d <= hi:
                body.extend(self.pp(d) if toks[d].pos == "ADP" else self.np(d, keep_definite=True))
        for p in self.kids(v, "prep"):
            if not lo <= p <= hi:
                body.extend(self.pp(p))
        inside = self.qids[v] >= 0
        for _, p, w, t in sorted((pos + (len(toks) if pos < v else 0), pos, w, t) for pos, w, t in
                                 zip(body.positions, body.words, body.tokens) if (self.qids[pos] >= 0) == inside):
            q.add(w, t, p)
        self.stats[f"{kind} questions"] += 1
        yield {"q": q.tokens + ["?"], "t": " ".join(q.words) + "?", "s": verb.sentence, "span": [lo, hi], "k": kind}


def span_questions(book: Book) -> tuple[list[dict], Counter]:
    g = SpanGenerator(book)
    qs = list(g.span_questions())
    return qs, g.stats
