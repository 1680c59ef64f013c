"""Who did what to whom, read off the question's passages: the inverse of the dependency rules that make artificial
Who questions ("Basil had painted the portrait" -> "Who had painted the portrait?").

The question is parsed (spaCy, the model `prepare` parses books with) into a frame: the verbs "who" hangs from (with
their xcomp / ccomp: "Who swears to kill Dorian?" -> swear, kill), the role "who" plays there (the agent, the
patient, or the object of a preposition: "Who does Dorian fall in love with?" -> with), and the question's other
content words. A character's mention in a context sentence matches the frame when it plays that role for a verb of
the same lemma (or a WordNet synonym, where WordNet's data is installed). Two numbers per character: its matches, and
its matches in a sentence that also holds one of the question's other arguments (a character it names, or one of its
content words). A copular question ("Who is Lord Henry's uncle?") has no verb to match: both are 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from whoqa.core.book import Book, Token, span_head

AGENT, PATIENT = "agent", "patient"
SUBJECTS = {"nsubj", "csubj"}
OBJECTS = {"dobj", "nsubjpass", "obj"}
LIGHT_VERBS = {"be", "do", "have"}  # as the question's only verb they say nothing ("Who is ...?", "Who has ...?")
CONTENT_POS = {"NOUN", "VERB", "ADJ"}
STOP_LEMMAS = {"who", "whom", "whose", "be", "do", "have", "story", "book", "novel", "character", "person", "man",
               "woman", "name", "what", "which", "one"}


@dataclass
class Frame:
    """What a Who question asks of its answer."""
    verbs: set[str] = field(default_factory=set)  # lemmas (synonyms added) of the verbs "who" depends on
    role: str = ""  # AGENT | PATIENT | "prep:<lemma>" | "" (nothing to match)
    args: set[str] = field(default_factory=set)  # the question's other content lemmas

    def __bool__(self) -> bool:
        return bool(self.verbs and self.role)


@lru_cache(maxsize=1)
def _nlp():
    from whoqa.core.lexicon import load_nlp
    return load_nlp()


@lru_cache(maxsize=1)
def _wordnet():
    from whoqa.core.metrics import wordnet
    return wordnet()


def warm() -> None:
    """Load what parsing a question needs (spaCy's pipeline; NLTK and WordNet's data where installed: about 1.5 s
    together) ahead of the first question: the service does it in a thread while a book opens."""
    _nlp()
    _wordnet()


@lru_cache(maxsize=4096)
def _synonyms(lemma: str) -> frozenset[str]:
    wn = _wordnet()
    if wn is None:
        return frozenset()
    return frozenset(l.name().lower() for s in wn.synsets(lemma, pos="v")[:3] for l in s.lemmas()
                     if "_" not in l.name())


@lru_cache(maxsize=4096)
def question_frame(question: str) -> Frame:
    """The question's frame (parsed once per question and process)."""
    doc = _nlp()(question)
    who = next((t for t in doc if t.lower_ in ("who", "whom")), None)
    if who is None:
        return Frame()
    if who.dep_ in SUBJECTS:
        role, verb = AGENT, who.head
    elif who.dep_ in OBJECTS:  # a stranded preposition makes it that preposition's object: "Who does he live with?"
        role, verb = PATIENT, who.head
        stranded = next((t for t in verb.subtree if t.dep_ == "prep" and t.i > verb.i
                         and not any(c.dep_ == "pobj" for c in t.children)), None)
        if stranded is not None:
            role = f"prep:{stranded.lemma_.lower()}"
    elif who.dep_ == "pobj" and (who.head.dep_ == "agent" or who.head.lower_ == "by" and any(
            c.dep_ == "auxpass" for c in who.head.head.children)):  # "by whom was he killed?"
        role, verb = AGENT, who.head.head
    elif who.dep_ == "pobj":
        role, verb = f"prep:{who.head.lemma_.lower()}", who.head.head
    else:
        return Frame()
    while verb.pos_ not in ("VERB", "AUX") and verb.head.i != verb.i:  # "fall in love with": with -> love -> fall
        verb = verb.head
    verbs = {verb.lemma_.lower()} | {c.lemma_.lower() for c in verb.children
                                     if c.dep_ in ("xcomp", "ccomp") and c.pos_ == "VERB"}
    if verb.dep_ in ("xcomp", "ccomp") and verb.head.pos_ == "VERB":
        verbs.add(verb.head.lemma_.lower())
    # "love" in "fall in love with": the noun the preposition hangs from is part of the predicate
    if role.startswith("prep:") and who.head.head.pos_ == "NOUN":
        verbs.add(who.head.head.lemma_.lower())
    if not (verbs - LIGHT_VERBS):
        return Frame()
    verbs = verbs - LIGHT_VERBS
    verbs |= {s for v in verbs for s in _synonyms(v)}
    args = {t.lemma_.lower() for t in doc if t.pos_ in CONTENT_POS and t.pos_ != "PROPN" and not t.is_stop
            and t.lemma_.lower() not in verbs | STOP_LEMMAS}  # (the names it holds count as characters: `named`)
    return Frame(verbs, role, args)


def _governor(tokens: list[Token], i: int, steps: int = 3) -> Token | None:
    """The verb a token hangs from, within a few steps ("fell in love with Sibyl": with -> love -> fell)."""
    t = tokens[i]
    for _ in range(steps):
        if t.head == t.index:
            return None
        t = tokens[t.head]
        if t.pos in ("VERB", "AUX"):
            return t
    return None


def mention_role(tokens: list[Token], start: int, end: int) -> tuple[str, list[Token]]:
    """(role, the verb and nouns it is the role of) of a mention: AGENT of the verb it is the subject of (or the
    by-phrase of), PATIENT of the verb it is the object of, prep:<p> for the object of a preposition."""
    t = tokens[span_head(tokens, start, end)]
    if t.dep == "conj":  # "Jim and Sibyl left": Sibyl takes Jim's role
        t = tokens[t.head]
    head = tokens[t.head]
    if t.dep in SUBJECTS:
        return AGENT, [head]
    if t.dep in OBJECTS:
        return PATIENT, [head]
    if t.dep == "pobj":
        if head.dep == "agent":
            return AGENT, [tokens[head.head]]
        gov = _governor(tokens, head.index)
        near = [tokens[head.head]] + ([gov] if gov is not None else [])
        return f"prep:{head.lemma.lower()}", near
    return "", []


def verb_sentences(book: Book, verbs: set[str]) -> list[int]:
    """The book's sentences holding a verb of these lemmas (in order): where the whole book says who did what the
    question asks, wherever BM25F's context, built from the question's words, did not reach (an index of lemma ->
    sentences, made once per Book)."""
    index = getattr(book, "_verb_sentences", None)
    if index is None:
        index = {}
        for s, (a, b) in enumerate(book.sentences):
            for t in book.tokens[a:b]:
                if t.pos in ("VERB", "AUX"):
                    hold = index.setdefault(t.lemma.lower(), [])
                    if not hold or hold[-1] != s:
                        hold.append(s)
        book._verb_sentences = index
    return sorted({s for v in verbs for s in index.get(v, ())})


def question_roles(book: Book, sentences: list[int], frame: Frame | None, named: set[int],
                   of=lambda c: c) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """(role matches over these sentences, over every sentence of the book holding one of the question's verbs):
    what the role features count (whoqa.ranker.features); nothing without a frame."""
    if not frame:
        return {}, {}
    return (role_matches(book, sentences, frame, named, of),
            role_matches(book, verb_sentences(book, frame.verbs), frame, named, of))


def role_matches(book: Book, sentences: list[int], frame: Frame, named: set[int], of=lambda c: c) -> dict[int, list[int]]:
    """character (through `of`: a character id -> the candidate it counts for) -> [matches, matches beside another
    argument of the question] over these sentences."""
    out: dict[int, list[int]] = {}
    if not frame:
        return out
    tokens = book.tokens
    for s in sentences:
        a, b = book.sentences[s]
        mentions = book.sentence_mentions(s)
        lemmas = {t.lemma.lower() for t in tokens[a:b]}
        present = {m.char_id for m in mentions}
        for m in mentions:
            role, heads = mention_role(tokens, m.start, m.end)
            if role != frame.role or not any(h.lemma.lower() in frame.verbs for h in heads):
                continue
            c = of(m.char_id)
            if c is None:
                continue
            hit = out.setdefault(c, [0, 0])
            hit[0] += 1
            if frame.args & lemmas or any(n in present and of(n) != c for n in named):
                hit[1] += 1
    return out
