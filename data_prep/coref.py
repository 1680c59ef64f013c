"""Pronoun resolution for characters: agreement, recency, syntactic role, salience, and quotation structure.

Walks the book paragraph by paragraph, keeping the recent character mentions:
  1. third-person pronouns in narration go to the best-scoring recent character of matching gender
     (subjects and salient characters preferred; a non-reflexive object never binds to its own verb's subject);
  2. each quotation gets a speaker (the character subject of a speech verb beside it, else the conversation's turn);
  3. inside a quotation, I/me/my is the speaker, you/your the addressee (a vocative name, else the other party),
     and he/she are resolved as in 1 but never to the speaker;
  4. first person outside quotations is the narrator (character 0);
  5. a person reference that is no character gets an entity of its own (a negative id here): a he/she with no named
     antecedent in reach is an unnamed person, continued by the next he/she of its gender; an unresolved I or you
     is its own entity; a quotation whose speech verb has a common noun for subject has a nameless speaker.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from whoqa.core.book import Token
from data_prep.characters import salience

NARRATOR = 0
MALE = {"he", "him", "his", "himself"}
FEMALE = {"she", "her", "hers", "herself"}
FIRST = {"i", "me", "my", "mine", "myself"}
SECOND = {"you", "your", "yours", "yourself", "thou", "thee", "thy", "thine"}
PLURAL = {"they", "them", "their", "theirs", "themselves", "we", "us", "our", "ours", "ourselves"}
REFLEXIVE = {"himself", "herself", "myself", "yourself"}
SPEECH_VERBS = {"say", "ask", "cry", "reply", "answer", "exclaim", "continue", "whisper", "shout", "call", "add",
                "murmur", "mutter", "remark", "observe", "return", "repeat", "respond", "declare", "inquire",
                "enquire", "protest", "explain", "retort", "rejoin", "interrupt", "begin", "go", "scream", "sob",
                "laugh", "groan", "gasp", "stammer", "insist", "suggest", "demand", "roar", "thunder", "growl",
                "sneer", "snap", "tell", "think", "write", "plead", "urge", "admit", "agree", "say", "echo"}
SUBJECT_DEPS = {"nsubj", "nsubjpass"}
VOCATIVE_DEPS = {"npadvmod", "dep", "appos", "intj", "ROOT", "attr", "vocative", "nmod"}
OPEN_QUOTES = {'"', "\u201c", "``"}
CLOSE_QUOTES = {'"', "\u201d", "''"}
SINGLE_OPEN, SINGLE_CLOSE = {"\u2018", "`"}, {"\u2019", "'"}  # British typography: 'single quotes' for speech


@dataclass
class Weights:
    """Scoring weights for an antecedent: hand-set rules (these defaults) or learned from LitBank
    (`whoqa train-coref`, data_prep.coref_learn). A candidate's score is the dot product of FEATURES' weights with
    its feature values."""
    window: int = 6  # sentences back that hold candidates
    long_window: int = 25  # fallback: the last gender-matching character this far back
    unnamed_gap: int = 3  # sentences over which a he/she with no named antecedent continues an unnamed person
    distance: float = 1.5  # per sentence back
    subject: float = 0.8  # antecedent mention was a subject
    parallel: float = 0.5  # pronoun and antecedent both subjects
    gender: float = 2.0  # gender known and agreeing
    salience: float = 1.0  # per log(count)
    quote_mismatch: float = 2.0  # one inside a quotation, the other outside
    same_quote: float = 0.5
    reflexive: float = 10.0  # a reflexive and the subject of its own clause
    vocative: float = 1.0  # a name spoken to someone is rarely the next "he"
    name: float = 0.0  # the candidate's latest mention is a name (not a pronoun)
    nearest: float = 0.0  # the candidate is the most recently mentioned of those scored
    same_sentence: float = 0.0  # the candidate's latest mention is in the pronoun's sentence
    recent: float = 0.0  # per log(1 + the candidate's mentions within the window): who the passage is about
    last_subject: float = 0.0  # the candidate is the latest subject among the candidates
    possessive_subject: float = 0.0  # a his/her and the subject of its own sentence ("She lit her pipe")

    def vector(self) -> list[float]:
        return [getattr(self, f) for f in FEATURES]


# feature -> its sign in the score (a weight is a magnitude: distance and mismatches count against a candidate)
FEATURES = {"distance": -1, "subject": 1, "parallel": 1, "gender": 1, "salience": 1, "quote_mismatch": -1,
            "same_quote": 1, "reflexive": 1, "vocative": -1, "name": 1, "nearest": 1, "same_sentence": 1,
            "recent": 1, "last_subject": 1, "possessive_subject": 1}


@dataclass
class Resolved:
    start: int
    end: int
    char: int
    kind: str  # PROP | PRON
    subject: bool
    in_quote: bool
    quote: int  # quotation id, -1 outside


@dataclass
class Quote:
    id: int
    start: int
    end: int  # inclusive token range of the quotation's words
    paragraph: int
    speaker: int = -1
    addressee: int = -1
    vocatives: list = field(default_factory=list)


def quote_ids(tokens: list[Token]) -> list[int]:
    """Quotation id per token (-1 outside), quote marks included.

    Straight quotes toggle; curly ones say which side they are; a paragraph end or a new opening mark closes an
    open quotation (a speech running over paragraphs reopens each one). A text whose opening single quotes
    outnumber its double quote marks quotes speech with single ones (a lone closing ' is then a quote, not an
    apostrophe: the tokenizer keeps apostrophes on their words).
    """
    opens, closes = OPEN_QUOTES, CLOSE_QUOTES
    n_single = sum(1 for t in tokens if t.word in SINGLE_OPEN)
    if n_single > sum(1 for t in tokens if t.word in OPEN_QUOTES):
        opens, closes = SINGLE_OPEN, SINGLE_CLOSE
    ids = [-1] * len(tokens)
    cur, n, para = -1, 0, None
    for i, t in enumerate(tokens):
        if t.paragraph != para:
            para, cur = t.paragraph, -1
        w = t.word
        if w in opens and (cur < 0 or w != '"'):
            cur, n = n, n + 1
            ids[i] = cur
        elif cur >= 0 and w in closes:
            ids[i] = cur
            cur = -1
        else:
            ids[i] = cur
    return ids


def _quotes(tokens: list[Token], qids: list[int]) -> list[Quote]:
    quotes: dict[int, Quote] = {}
    for i, q in enumerate(qids):
        if q >= 0:
            if q not in quotes:
                quotes[q] = Quote(q, i, i, tokens[i].paragraph)
            quotes[q].end = i
    return [quotes[k] for k in sorted(quotes)]


class Resolver:
    def __init__(self, tokens: list[Token], names: list[Resolved], genders: dict[int, str | None],
                 counts: dict[int, int], weights: Weights | None = None):
        self.tokens = tokens
        self.w = weights or Weights()
        self.genders = genders
        self.counts = counts
        self.qids = quote_ids(tokens)
        self.quotes = _quotes(tokens, self.qids)
        self.names = sorted(names, key=lambda m: m.start)
        self.history: list[Resolved] = []  # resolved mentions in text order so far
        self.decisions: list | None = None  # set to [] to record (token, {character: features}, {character: its
        # nearest mention's first token}) per pronoun scored
        self.narrator_seen = any(m.char == NARRATOR for m in self.names)
        self.unnamed: dict[str, tuple[int, int]] = {}  # gender -> (latest unnamed person's id, its last sentence)
        self.n_unnamed = 0

    def run(self) -> list[Resolved]:
        toks, qids = self.tokens, self.qids
        by_para: dict[int, list[int]] = {}
        for i, t in enumerate(toks):
            low = t.word.lower()
            if low in MALE or low in FEMALE or low in FIRST or low in SECOND:
                if t.pos == "PRON" or t.tag in ("PRP", "PRP$"):
                    by_para.setdefault(t.paragraph, []).append(i)
        names_by_para: dict[int, list[Resolved]] = {}
        for m in self.names:
            names_by_para.setdefault(toks[m.start].paragraph, []).append(m)
        quotes_by_para: dict[int, list[Quote]] = {}
        for q in self.quotes:
            quotes_by_para.setdefault(q.paragraph, []).append(q)
        paras = sorted(set(by_para) | set(names_by_para) | set(quotes_by_para))
        last_speakers: list[int] = []  # distinct recent speakers, most recent last
        last_quote_para = -10
        for p in paras:
            pron = by_para.get(p, [])
            new: list[Resolved] = list(names_by_para.get(p, []))
            # 1. narration: names are known; third-person and first-person pronouns outside quotes
            for i in pron:
                if qids[i] >= 0:
                    continue
                low = toks[i].word.lower()
                if low in FIRST:
                    new.append(self._mention(i, NARRATOR))
                    self.narrator_seen = True
                elif low in MALE or low in FEMALE:
                    c = self._antecedent(i, new)
                    new.append(self._mention(i, c if c is not None else self._unnamed_person(i)))
                elif low in SECOND:
                    new.append(self._mention(i, self._new_unnamed()))  # the reader, or anyone: its own entity
                new.sort(key=lambda m: m.start)
            # 2. speakers of this paragraph's quotations
            prev = None
            for q in quotes_by_para.get(p, []):
                q.vocatives = [m.char for m in new if q.start <= m.start <= q.end and m.kind == "PROP"
                               and toks[m.start].dep in VOCATIVE_DEPS]
                q.speaker = self._speaker(q, new)
                if q.speaker < 0 and prev is not None:
                    q.speaker = prev.speaker  # '"Yes," he said. "I know."': one paragraph, one speaker
                if q.speaker < 0 and p - last_quote_para <= 2 and len(last_speakers) >= 2:
                    q.speaker = last_speakers[-2]  # a bare exchange of quotations: turns alternate
                other = next((c for c in reversed(last_speakers) if c != q.speaker), -1)
                if other < 0 and q.speaker != NARRATOR and self.narrator_seen:
                    other = NARRATOR  # a first-person narrator is the usual other party of a conversation
                q.addressee = next((v for v in q.vocatives if v != q.speaker), other)
                if q.speaker >= 0:
                    if q.speaker in last_speakers:
                        last_speakers.remove(q.speaker)
                    last_speakers.append(q.speaker)
                last_quote_para = p
                prev = q
            # 3. pronouns inside quotations
            for i in pron:
                q = qids[i]
                if q < 0:
                    continue
                quote = self.quotes[q]
                low = toks[i].word.lower()
                c = None
                if low in FIRST:
                    c = quote.speaker if quote.speaker >= 0 else None
                elif low in SECOND:
                    c = quote.addressee if quote.addressee >= 0 else None
                else:
                    c = self._antecedent(i, new, exclude=quote.speaker)
                    if c is None:
                        c = self._unnamed_person(i)
                if c is None:
                    c = self._new_unnamed()  # an unknown speaker's "I", an unknown addressee's "you"
                new.append(self._mention(i, c))
                new.sort(key=lambda m: m.start)
            self.history.extend(new)
        return [m for m in self.history if m.kind == "PRON"]

    def groups(self, max_gap: int = 2) -> list[tuple[int, int]]:
        """Plural pronouns as group entities: (token, group id). A they/we joins the previous one of its kind
        (same person, same side of a quotation) within max_gap sentences, else opens a new group. Groups are not
        characters; they are kept so the processed book holds all of a text's person references."""
        out, last, n = [], {}, 0
        for i, t in enumerate(self.tokens):
            low = t.word.lower()
            if low not in PLURAL or not (t.pos == "PRON" or t.tag in ("PRP", "PRP$")):
                continue
            key = ("we" if low in ("we", "us", "our", "ours", "ourselves") else "they", self.qids[i] >= 0)
            prev = last.get(key)
            if prev is not None and t.sentence - self.tokens[prev[0]].sentence <= max_gap:
                g = prev[1]
            else:
                g, n = n, n + 1
            last[key] = (i, g)
            out.append((i, g))
        return out

    def _new_unnamed(self) -> int:
        self.n_unnamed += 1
        return -self.n_unnamed

    def _unnamed_person(self, i: int) -> int:
        """A he/she with no named antecedent in reach: an unnamed person ("the old man ... he"), the latest one of its
        gender if mentioned within Weights.unnamed_gap sentences, else a new one. Negative ids: people who are no
        characters (written to .entities after the characters, like the we/they groups)."""
        t = self.tokens[i]
        gender = "male" if t.word.lower() in MALE else "female"
        prev = self.unnamed.get(gender)
        c = prev[0] if prev is not None and t.sentence - prev[1] <= self.w.unnamed_gap else self._new_unnamed()
        self.unnamed[gender] = (c, t.sentence)
        return c

    def _mention(self, i: int, char: int) -> Resolved:
        t = self.tokens[i]
        return Resolved(i, i, char, "PRON", t.dep in SUBJECT_DEPS, self.qids[i] >= 0, self.qids[i])

    def _speaker(self, q: Quote, para_mentions: list[Resolved]) -> int:
        """The character subject of a speech verb beside the quotation (else the nearest character subject beside
        it), or a nameless speaker when the nearest speech verb's subject is a common noun; -1 when there is none."""
        toks = self.tokens
        lo, hi = toks[q.start].sentence - 1, toks[q.end].sentence + 1
        before = self.quotes[q.id - 1].end if q.id > 0 else -1  # a mention beyond a neighbouring quotation
        after = self.quotes[q.id + 1].start if q.id + 1 < len(self.quotes) else len(toks)  # speaks that one

        def distance(j: int, speech: bool) -> int:
            d = min(abs(j - q.start), abs(j - q.end))
            if speech:
                d -= 1000  # a speech verb beats mere proximity
            if not toks[q.start].sentence <= toks[j].sentence <= toks[q.end].sentence:
                d += 500  # and one in the quotation's own sentence beats one beside it
            return d

        best, best_d = -1, None
        for m in para_mentions:
            if m.in_quote or not before < m.start < after or not lo <= toks[m.start].sentence <= hi:
                continue
            head = toks[toks[m.start].head]
            speech = head.lemma.lower() in SPEECH_VERBS
            if not (m.subject or speech and m.start > head.index):  # '"...," cried Amy' parses Amy as an object
                continue
            d = distance(m.start, speech)
            if best_d is None or d < best_d:
                best, best_d = m.char, d
        # a speech verb whose subject is no character ("said my brother's wife"): a nameless speaker, not a guess
        first = next(j for j in range(q.start, -1, -1) if j == 0 or toks[j - 1].sentence < lo)
        for j in range(first, len(toks)):
            t = toks[j]
            if t.sentence > hi:
                break
            if t.pos == "NOUN" and t.dep in SUBJECT_DEPS and self.qids[j] < 0 and before < j < after and \
                    toks[t.head].lemma.lower() in SPEECH_VERBS and (best_d is None or distance(j, True) < best_d):
                best, best_d = None, distance(j, True)
        return self._new_unnamed() if best is None else best

    def _antecedent(self, i: int, current: list[Resolved], exclude: int = -1) -> int | None:
        toks, w = self.tokens, self.w
        t = toks[i]
        low = t.word.lower()
        gender = "male" if low in MALE else "female"
        reflexive = low in REFLEXIVE
        sent = t.sentence
        in_quote = self.qids[i] >= 0
        subj = t.dep in SUBJECT_DEPS
        best: dict[int, dict] = {}
        where: dict[int, int] = {}  # candidate -> first token of its nearest mention (for contextual features)
        recent: dict[int, int] = {}
        fallback, last_subject = None, None
        for m in self._recent(i, current):
            s_back = sent - toks[m.start].sentence
            if s_back > w.long_window:
                break
            c = m.char
            if c == exclude or c <= NARRATOR:  # not the narrator, nor an unnamed person
                continue
            g = self.genders.get(c)
            if g is not None and g != gender:
                continue
            if fallback is None and g == gender:
                fallback = c
            if s_back > w.window:
                continue
            recent[c] = recent.get(c, 0) + 1
            if last_subject is None and m.subject:
                last_subject = c
            if c in best:
                continue
            mt = toks[m.start]
            same_clause = s_back == 0 and toks[m.end].head == t.head
            if not reflexive and same_clause and m.subject and t.dep not in ("poss",):
                continue  # binding: "Holmes saw him" -> him is not Holmes
            f = {"distance": s_back, "salience": salience(self.counts.get(c, 1)), "gender": float(g == gender),
                 "subject": float(m.subject), "parallel": float(m.subject and subj),
                 "quote_mismatch": float(m.in_quote != in_quote),
                 "same_quote": float(m.in_quote == in_quote and in_quote and m.quote == self.qids[i]),
                 "reflexive": float(reflexive and same_clause and m.subject),
                 "vocative": float(mt.dep in VOCATIVE_DEPS and m.in_quote and m.kind == "PROP"),
                 "name": float(m.kind == "PROP"), "nearest": float(not best), "same_sentence": float(s_back == 0),
                 "possessive_subject": float(t.dep == "poss" and s_back == 0 and m.subject)}
            best[c] = f
            where[c] = m.start
        for c, f in best.items():
            f["recent"] = salience(recent[c])
            f["last_subject"] = float(c == last_subject)
        vectors = {c: [sign * f[k] for k, sign in FEATURES.items()] for c, f in best.items()}
        if self.decisions is not None and vectors:
            self.decisions.append((i, vectors, where))
        if vectors:
            weights = w.vector()
            scores = {c: sum(a * b for a, b in zip(weights, x)) for c, x in vectors.items()}
            return max(scores.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        return fallback

    def _recent(self, i: int, current: list[Resolved]):
        """Character mentions before token i, most recent first: this paragraph's, then the history's."""
        for m in reversed(current):
            if m.end < i:
                yield m
        yield from reversed(self.history)
