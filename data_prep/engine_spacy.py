"""The offline book engine: spaCy parse -> name clusters -> pronoun resolution -> BookNLP-format rows."""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from whoqa.core.book import Token, span_head
from data_prep.characters import NameMention, cluster_names, find_name_mentions, name_gender
from data_prep.coref import FIRST, NARRATOR, SUBJECT_DEPS, VOCATIVE_DEPS, Resolved, Resolver, Weights, quote_ids
from data_prep.parse import Parsed
from data_prep.parse_pool import parse_book
from whoqa.core.lexicon import SPACY_MODEL, load_nlp
from data_prep.coref import FEMALE, MALE

GENDER_KEYS = {"male": "he/him/his", "female": "she/her"}


@dataclass
class Processed:
    """A processed book as the rows of its three files."""
    token_rows: list[list]
    entity_rows: list[list]
    book: dict
    stats: dict = field(default_factory=dict)
    decisions: list | None = None  # with SpacyEngine.record: (token, {character: features}, {character: mention
    # start}) per pronoun scored


class SpacyEngine:
    name = "spacy"
    writes_files = False  # whoqa writes the rows it returns (data_prep.components)

    def __init__(self, model: str = SPACY_MODEL, weights: Weights | None = None, batch_size: int = 128,
                 resolver=Resolver, resolver_name: str = "rules", processes: int = 1):
        """`resolver`: the pronoun resolver's factory (data_prep.components.RESOLVERS picks it by name); `processes`:
        a book's parse across this many (0: auto; data_prep.parse_pool); `prepare` and `ask` pass
        PrepareConfig.parse_processes."""
        self.nlp = load_nlp(model)
        self.weights = weights or Weights()
        self.make_resolver, self.resolver_name = resolver, resolver_name
        self.batch_size = batch_size
        self.processes = processes
        self.record = False  # keep the resolver's scored decisions (learning its weights, data_prep.coref_learn)

    def process_text(self, text: str, progress=None) -> Processed:
        t0 = time.perf_counter()
        parsed = parse_book(self.nlp, text, self.batch_size, self.processes, progress)
        t1 = time.perf_counter()
        out = self.process_parsed(parsed)
        out.stats.update(words=len(text.split()), parse_seconds=round(t1 - t0, 3),
                         coref_seconds=round(time.perf_counter() - t1, 3))
        return out

    def process_parsed(self, parsed: Parsed) -> Processed:
        tokens = parsed.tokens
        if not tokens:
            raise ValueError("the book has no text (empty after removing the Gutenberg header and licence)")
        mentions = find_name_mentions(tokens, parsed.entities)
        cluster_names(tokens, mentions)
        per = [m for m in mentions if m.cat == "PER" and m.char >= 0]
        qids = quote_ids(tokens)
        _renumber(per)
        _merge_named_narrator(tokens, per, qids)
        names_by_char: dict[int, Counter] = defaultdict(Counter)
        for m in per:
            names_by_char[m.char][m.text] += 1
        genders = {c: name_gender(n)[0] for c, n in names_by_char.items()}
        for c, g in pronoun_gender(tokens, per, qids).items():
            genders[c] = g  # the book's own he/she outweigh the name's prior (the Famous Five's George is a girl)
        counts = {c: sum(n.values()) for c, n in names_by_char.items()}
        named = [Resolved(m.start, m.end, m.char, "PROP",
                          tokens[span_head(tokens, m.start, m.end)].dep in SUBJECT_DEPS, qids[m.start] >= 0,
                          qids[m.start]) for m in per]
        resolver = self.make_resolver(tokens, named, genders, counts, self.weights)
        resolver.decisions = [] if self.record else None
        pronouns = resolver.run()
        groups = resolver.groups()
        n_groups = max([g for _, g in groups] + [-1]) + 1
        groups += [(p.start, n_groups - p.char - 1) for p in pronouns if p.char < 0]  # unnamed people after groups
        out = build_output(tokens, per, [p for p in pronouns if p.char >= 0], [m for m in mentions if m.cat != "PER"],
                           genders, names_by_char, n_quotes=len(resolver.quotes), groups=sorted(groups))
        out.decisions = resolver.decisions
        return out



def _renumber(per: list[NameMention]) -> None:
    """Character ids 1..N by mention count (CHAR_1 is the most mentioned); 0 is kept for the narrator."""
    order = [c for c, _ in Counter(m.char for m in per).most_common()]
    new = {c: k + 1 for k, c in enumerate(order)}
    for m in per:
        m.char = new[m.char]


def _merge_named_narrator(tokens: list[Token], per: list[NameMention], qids: list[int]) -> None:
    """A first-person narrator is named only inside dialogue, mostly when spoken to ("Watson, ..."): the
    character named only in quotations and most often as a vocative becomes the narrator."""
    first_outside = sum(1 for t, q in zip(tokens, qids) if q < 0 and t.word.lower() in FIRST and t.pos == "PRON")
    if first_outside < max(5, 0.002 * len(tokens)):
        return
    outside, vocative, total = Counter(), Counter(), Counter()
    for m in per:
        total[m.char] += 1
        if qids[m.start] < 0:
            outside[m.char] += 1
        elif tokens[span_head(tokens, m.start, m.end)].dep in VOCATIVE_DEPS:
            vocative[m.char] += 1
    named = _self_named(tokens, per, qids)
    cands = [(v, c) for c, v in vocative.items() if outside[c] <= 0.1 * total[c] and v >= 2 and v >= 0.4 * total[c]]
    if named is None and cands:
        named = max(cands)[1]
    if named is not None:
        for m in per:
            if m.char == named:
                m.char = NARRATOR


def _self_named(tokens: list[Token], per: list[NameMention], qids: list[int]) -> int | None:
    """The character a narrator names as themself: "Call me Ishmael", "My name is X", "I am X", "I, X, ..."."""
    for m in per:
        if qids[m.start] >= 0:
            continue
        h = tokens[span_head(tokens, m.start, m.end)]
        verb = tokens[h.head]
        lo, hi = max(0, verb.index - 10), min(len(tokens), verb.index + 10)
        kids = [t for t in tokens[lo:hi] if t.head == verb.index and t.index != verb.index]
        kid_words = {t.word.lower() for t in kids}
        if verb.lemma == "call" and "me" in kid_words and h.dep in ("oprd", "dobj", "npadvmod", "attr", "xcomp", "ccomp"):
            return m.char
        if h.dep == "attr" and verb.lemma == "be":
            subj = next((t for t in kids if t.dep == "nsubj"), None)
            if subj is not None and (subj.word == "I" or subj.lemma == "name" and any(
                    t.head == subj.index and t.word.lower() == "my" for t in tokens[max(0, subj.index - 3):subj.index])):
                return m.char
        if h.dep == "appos" and verb.word in ("I", "me"):
            return m.char
    return None


def pronoun_gender(tokens: list[Token], per: list[NameMention], qids: list[int], min_count: int = 3,
                   min_share: float = 0.75) -> dict[int, str]:
    """Gender from the pronouns that follow a character's name in narration (GenderEM's evidence, counted):
    he/she in the rest of the sentence and the next one, where no other character is named in between."""
    he, she = Counter(), Counter()
    for k, m in enumerate(per):
        if qids[m.start] >= 0:
            continue
        limit_sent = tokens[m.end].sentence + 1
        nxt = per[k + 1].start if k + 1 < len(per) else len(tokens)
        i = m.end + 1
        while i < len(tokens) and i < nxt and tokens[i].sentence <= limit_sent:
            if qids[i] < 0:
                w = tokens[i].word.lower()
                if w in MALE:
                    he[m.char] += 1
                elif w in FEMALE:
                    she[m.char] += 1
            i += 1
    out = {}
    for c in set(he) | set(she):
        n = he[c] + she[c]
        if n >= min_count and max(he[c], she[c]) >= min_share * n:
            out[c] = "male" if he[c] > she[c] else "female"
    return out


def build_output(tokens: list[Token], per: list[NameMention], pronouns: list[Resolved], others: list[NameMention],
                 genders: dict[int, str | None], names_by_char: dict[int, Counter], n_quotes: int = 0,
                 groups: list[tuple[int, int]] = ()) -> Processed:
    token_rows, within, last_s = [], 0, -1
    for t in tokens:
        within = within + 1 if t.sentence == last_s else 0
        last_s = t.sentence
        token_rows.append([t.paragraph, t.sentence, within, t.index, t.word, t.lemma, t.start_char, t.end_char, t.pos,
                           t.tag, t.dep, t.head, "O"])
    chars = [(m.start, m.end, m.char, "PROP", m.text) for m in per] + \
            [(p.start, p.end, p.char, "PRON", tokens[p.start].word) for p in pronouns]
    first_group = max([c for *_, c, _, _ in chars] + [0]) + 1  # ids after the characters': groups, then places
    first_other = first_group + max([g for _, g in groups] + [-1]) + 1
    rows = [[c, s, e, prop, "PER", text] for s, e, c, prop, text in chars]
    rows += [[first_group + g, i, i, "PRON", "PER", tokens[i].word] for i, g in groups]
    rows += [[first_other + m.char, m.start, m.end, "PROP", m.cat, m.text] for m in others]
    rows.sort(key=lambda r: (r[1], r[2]))
    book = {"characters": character_records(tokens, chars, genders)}
    stats = {"tokens": len(tokens), "sentences": tokens[-1].sentence + 1 if tokens else 0,
             "name_mentions": len(per), "pronoun_mentions": len(pronouns), "quotes": n_quotes,
             "characters": len(book["characters"])}
    return Processed(token_rows, rows, book, stats)


def character_records(tokens: list[Token], chars: list[tuple], genders: dict[int, str | None]) -> list[dict]:
    """BookNLP's .book character records (characters seen at least twice), most mentioned first."""
    proper, pron, count = defaultdict(Counter), defaultdict(Counter), Counter()
    agent, patient, poss, mod = (defaultdict(list) for _ in range(4))
    for s, e, c, prop, text in chars:
        count[c] += 1
        (proper if prop == "PROP" else pron)[c][text] += 1
        i = span_head(tokens, s, e)
        t = tokens[i]
        if t.dep == "conj":  # "Bill and Ted ran": Ted takes Bill's role
            t = tokens[t.head]
        head = tokens[t.head]
        item = {"w": head.word, "i": head.index}
        if t.dep == "nsubj" and head.lemma == "be":
            mod[c] += [{"w": x.word, "i": x.index} for x in tokens[max(0, head.index - 8):head.index + 8]
                       if x.head == head.index and x.dep in ("attr", "acomp") and x.pos in ("NOUN", "ADJ")]
        elif t.dep == "nsubj" and head.pos == "VERB":
            agent[c].append(item)
        elif t.dep == "pobj" and head.dep == "agent" and tokens[head.head].pos == "VERB":
            agent[c].append({"w": tokens[head.head].word, "i": head.head})
        elif t.dep in ("dobj", "nsubjpass") and head.pos == "VERB":
            patient[c].append(item)
        elif t.dep == "poss":
            poss[c].append(item)
    out = []
    for c, n in count.most_common():
        if n < 2:
            continue
        g = genders.get(c)
        out.append({
            "id": c, "count": n,
            "g": {"argmax": GENDER_KEYS[g], "max": 1.0, "inference": {GENDER_KEYS[g]: 1.0}} if g in GENDER_KEYS else None,
            "mentions": {"proper": [{"c": v, "n": k} for k, v in proper[c].most_common()], "common": [],
                         "pronoun": [{"c": v, "n": k} for k, v in pron[c].most_common()]},
            "agent": agent[c], "patient": patient[c], "poss": poss[c], "mod": mod[c]})
    return out
