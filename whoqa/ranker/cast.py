"""A book's cast: the characters that are people, each once, under names that tell them apart.

`prepare`'s name clusters hold whatever NER called a person: abstractions and exclamations written with a capital
("Death", "Mind", "Nay"), places ("England", "Dartmoor"), deities ("God"), nouns with an article ("the Jew"), and an
unnamed narrator or group (no proper name at all). A Who question's answer is a person, so the answer candidates are
the cast (`Cast.people`). One person is sometimes two clusters: the same name twice, or a nickname beside a titled
name ("Harry" beside "Lord Henry", BookNLP's nickname table): those merge, and their mentions count as one
character's. The rules read only the book's own text, so they hold for any book; `whoqa eval-cast` measures them
against LitBank's gold people.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from whoqa.core.lexicon import gender_table, nicknames
from whoqa.core.aliases import FEMALE_TITLES, MALE_TITLES, TITLES
from whoqa.core.book import Book, char_token
from whoqa.ranker.person import PersonFit, features

DEITIES = {"dieu", "bon dieu", "god", "lord", "heaven", "heavens", "providence", "christ", "jesus", "allah", "jove", "jehovah", "almighty",
           "satan", "devil", "lucifer", "fate", "fortune", "nature"}
ARTICLES = {"the", "a", "an"}
LOCATIVES = {"in", "into", "near", "through", "across", "within", "throughout", "beyond", "outside", "inside",
             "toward", "towards", "around"}  # what people are seldom in: "lived in Manchester", "went into Raveloe"
PLACE_HEADS = {"lane", "street", "road", "square", "hall", "house", "corner", "court", "castle", "abbey", "manor",
               "park", "hill", "hills", "bridge", "river", "lake", "island", "bay", "inn", "church", "chapel", "hotel",
               "station", "college", "school", "farm", "lodge", "place", "gardens", "row", "cross", "land", "mines",
               "valley", "forest", "wood", "woods", "mountain", "mountains", "sea", "ocean", "city", "town", "street",
               "avenue", "palace", "tower", "harbour", "harbor", "cottage", "grange", "heights", "common", "fields"}
PLACE_HEADS |= {"berg", "point", "kraal", "mount", "peak", "desert", "plain", "plains", "pass", "falls", "creek"}
KIN = {**dict.fromkeys(["daddy", "papa", "pa", "pere", "père", "grandpa", "granddad", "grandfather", "marse", "mars",
                        "massa", "mas'r", "baas", "jedge"], "male"),  # (dialect: "Baas" master, "Jedge" judge)
       **dict.fromkeys(["mamma", "mama", "mammy", "ma", "mere", "mère", "granny", "grandma", "grandmother"], "female")}
PARTICLES = {"da", "de", "di", "du", "del", "della", "van", "von", "der", "le", "la"}  # of a surname ("da Silvestra")
PLACE_PREFIXES = {"rue", "mount", "lake", "cape", "port", "fort", "river", "boulevard", "avenue", "place"}  # "Rue Scribe"
INTERJECTION_SHARE = 0.6  # a word that starts its sentences this often, a comma or "!" after it, is an exclamation
COMMON_SHARE = 0.5  # a name whose word is written in lower case this often is a common word ("death", "nay")
ARTICLE_SHARE = 0.5  # a name after an article this often is a noun ("the Jew")
PLACE_SHARE = 0.5  # a name that NER calls a place or organisation this often is one
LOCATIVE_SHARE = 0.4  # a name after "in", "into", "near", ... this often is a place
DESTINATIONS = LOCATIVES | {"at", "to", "from"}  # "went to Perros", "at Epinay": said of people too ("said to Raoul")
DESTINATION_SHARE = 0.6  # so only a name written after them this often, and as their object, is a place
OWNED_SHARE = 0.6  # a name after a possessive this often is a thing ("Wilson's Calendar")
OWNING_SHARE = 0.5  # one whose possessive is followed by the same capitalised word this often is part of a place's
#                     name ("Dawson's Landing", "Sheba's Breasts")
ALIAS_SAID = {", or rather", ", alias", ", late", ", otherwise", ", otherwise called", ", known as", ", surnamed",
              ", called", ", or, rather"}  # "Umbopa, or rather Ignosi", "Ignosi, late Umbopa": the book saying two
#                                               names are one person's (also "Umbopa--Ignosi, I mean"; a dash alone
#                                               is an interruption: "Luigi--Angelo", "Monsieur President--Joseph")
ALIAS_OR = {", or"}  # "Larsan, or Ballmeyer,": one person's where said twice, or of a quoted name ("Bougwan," or Glass Eye)
SPELLING_RATIO = 0.85  # two one-word names this alike by difflib are two spellings of one ("Mirandy", "Filluel")
CO_MENTIONED = 2  # two clusters sharing more sentences than this are two people, however alike their names
QUOTES = {'"', "'", "\u201c", "\u201d", "\u2018", "\u2019", "`", "``", "''", "_"}
NAME_REFERENCES = 100  # a word Gutenberg's books refer to with he or she this often is a name ("Rose", "Will", "Grace")
ROLES = {"nsubj", "nsubjpass", "dobj", "iobj", "dative", "poss", "appos", "attr", "agent", "oprd"}  # what a person
# is in a sentence: one who acts, is acted on, owns, is named ("call me Ishmael") or named again; or one addressed
# (", Watson,"). An exclamation ("Marry, I trow") or a place only ever written after a preposition or as a modifier is
# none of these


@dataclass
class Cast:
    """The people of a book: each person's representative character id -> its member ids (itself first)."""
    groups: dict[int, list[int]]  # most mentioned first
    names: dict[int, str]  # representative -> its name (no two alike)
    dropped: dict[int, str] = field(default_factory=dict)  # character id -> why it is not a person
    genders: dict[int, str | None] = field(default_factory=dict)  # representative -> its gender, a title's first

    @property
    def people(self) -> list[int]:
        return list(self.groups)

    def of(self, char_id: int) -> int | None:
        """The person a character id belongs to (its representative), None for one that is not a person."""
        if not hasattr(self, "_rep"):
            self._rep = {m: r for r, ms in self.groups.items() for m in ms}
        return self._rep.get(char_id)


def _plain(word: str) -> str:
    return word.lower().rstrip(".")


PLAIN_TITLES = {_plain(t) for t in TITLES}  # titles as `_plain` writes a name's words


def name_words(name: str) -> list[str]:
    """A name's words without titles: "Lord Henry Wotton" -> ["Henry", "Wotton"]."""
    return [w for w in name.replace("'s", "").split() if _plain(w) not in PLAIN_TITLES and w[:1].isalpha()]


def title_gender(aliases: list[str]) -> str | None:
    """The gender the person's titles give ("Lady Agatha": female; "Lord Fermor": male), None when it has no gendered
    title or its titles disagree. A title is near-certain where the pronouns near a name are not (the engine called
    Lady Agatha "male"); coreference keeps its own reading (a title rule there cost LitBank pronoun accuracy)."""
    said = {"male" if w in MALE_TITLES else "female" for a in aliases for w in a.lower().split()[:1]
            if w in MALE_TITLES | FEMALE_TITLES}
    return said.pop() if len(said) == 1 else None


def _titled(aliases: list[str]) -> bool:
    return any(a.split() and a.split()[0].lower() in MALE_TITLES | FEMALE_TITLES for a in aliases)


def _any_title(aliases: list[str]) -> bool:
    """Whether some name carries a title, one that says no gender included ("Professor Stangerson")."""
    return any(a.split() and _plain(a.split()[0]) in PLAIN_TITLES for a in aliases)


@dataclass
class _Usage:
    """How the book writes each word: capitalised inside a sentence, in lower case, and inside other entities."""
    capital: Counter
    lower: Counter
    place: Counter

    @classmethod
    def of(cls, book: Book) -> "_Usage":
        starts = {a for a, _ in book.sentences}
        capital, lower, place = Counter(), Counter(), Counter()
        for t in book.tokens:
            if t.word[:1].isupper():
                if t.index not in starts:
                    capital[t.word] += 1
            elif t.word[:1].islower():
                lower[t.word] += 1
        for m in book.others:
            for t in book.tokens[m.start:m.end + 1]:
                place[t.word] += 1
        return cls(capital, lower, place)


def _known_name(word: str) -> bool:
    """Whether Gutenberg's books refer to this word with he or she often enough that it is a name (NAME_REFERENCES)."""
    return sum(gender_table().get(word.lower(), (0.0, 0.0))) >= NAME_REFERENCES


def _common(word: str, usage: "_Usage") -> bool:
    """Whether the book writes this word in lower case at least as often as with a capital ("manager", "registrar")."""
    low = usage.lower[word.lower()]
    return low >= 3 and low >= COMMON_SHARE * (low + usage.capital[word])


def _exclaimed(tokens: list, proper: list, book: Book) -> int:
    """How many of the mentions begin their sentence with a comma, "!" or "?" after them ("Hush, child!")."""
    starts = book._starts if hasattr(book, "_starts") else None
    if starts is None:
        starts = book._starts = {a for a, _ in book.sentences}
    return sum(1 for m in proper if (m.start in starts or m.start > 0 and tokens[m.start - 1].word in ('"', "“", "'",
                                                                                                 "!", "?"))
               and m.end + 1 < len(tokens) and tokens[m.end + 1].word in (",", "!", "?", "—", "--"))


def _not_a_person(book: Book, cid: int, usage: _Usage, proper: list, others: set[str] = frozenset()) -> str | None:
    """Why character `cid` is not a person, or None when it is one."""
    c = book.characters[cid]
    if not c.aliases and (c.name == "NARRATOR" or c.name == char_token(cid)):
        return "no name (a narrator or group that is never named)"
    if any(p in c.name for p in ("?", "!", "--", "—")):
        return "not a name (punctuation inside it)"
    words = [w for w in name_words(c.name) if w.lower() not in KIN]
    if len(words) == 1 and len(words[0].rstrip(".")) == 1 and not _any_title(c.aliases):
        return "an initial alone"
    if len(words) == 1 and not any(ch in "aeiouy" for ch in words[0].lower()):
        return "not a name (no vowel: an interjection such as \"Mm\" or \"Hm\")"
    if not words:
        return "a deity" if c.name.lower().rstrip(".") in DEITIES else "a title or form of address, without a name"
    if _titled(c.aliases) and all(_common(w, usage) and not _known_name(w) for w in words):
        return "a title and a role, without a name (\"Mr. Manager\")"
    if " ".join(words).lower() in DEITIES or len(words) == 1 and words[0].lower() in DEITIES:
        return "a deity"
    if _titled(c.aliases):
        return None  # "Lady Agatha", "Mr. Hall": a title is given to people
    head = words[-1]
    known = _known_name(head)
    if usage.place[head] >= PLACE_SHARE * max(usage.place[head] + usage.capital[head], 1) and usage.place[head] >= 2:
        return "a place or organisation"
    if len(words) > 1 and words[-1].lower() in PLACE_HEADS:
        return "a place (its last word names one)"
    placed = [a for a in c.aliases if len(a.split()) > 1 and (a.split()[-1].lower() in PLACE_HEADS
                                                              or a.split()[0].lower() in PLACE_PREFIXES)]
    if placed and not known and not _titled(c.aliases):
        return f"a place (the book calls it {placed[0]!r})"
    if len(words) == 1 and len(head) > 6 and head.lower().endswith("land") and not known:
        return "a place (a land's name)"
    if len(words) == 1 and head.endswith("s") and not known and head[:-1] in others:
        return f"a family or people (the plural of {head[:-1]!r})"
    if len(words) == 1 and not known and proper and _exclaimed(book.tokens, proper, book) \
            >= INTERJECTION_SHARE * len(proper):
        return "an exclamation (it starts its sentences, a comma or '!' after it)"
    tokens = book.tokens
    located = sum(1 for m in proper if m.start > 0 and tokens[m.start - 1].word.lower() in LOCATIVES
                  and not (m.end + 1 < len(tokens) and tokens[m.end + 1].word in ("'s", "’s")))
    if proper and located >= LOCATIVE_SHARE * len(proper):
        return "a place (written after in, into, near, ...)"
    owned = sum(1 for m in proper if m.start > 0 and tokens[m.start - 1].word in ("'s", "’s"))
    owned_by = Counter(tokens[m.end + 2].word for m in proper if m.end + 2 < len(tokens)
                       and tokens[m.end + 1].word in ("'s", "’s") and tokens[m.end + 2].word[:1].isupper()
                       and not (m.start > 0 and tokens[m.start - 1].word.lstrip("-—_'\"“")[:1].isupper()))  # ("Pudd'nhead Wilson's
    #                                                                       Calendar": a person's full name owns it)
    thing, owning = owned_by.most_common(1)[0] if owned_by else ("", 0)  # ("Sheba's Breasts", "Dawson's Landing")
    if len(proper) >= 3 and owned >= OWNED_SHARE * len(proper):
        return "a thing someone owns, a title (\"Pudd'nhead Wilson's Calendar\")"
    if len(proper) >= 3 and owning >= OWNING_SHARE * len(proper) and not _titled(c.aliases):
        return f"part of a place's name (\"{head}'s {thing}\")"
    reached = sum(1 for m in proper if m.start > 0 and tokens[m.start - 1].word.lower() in DESTINATIONS
                  and tokens[m.end].dep == "pobj")
    if len(proper) >= 5 and reached >= DESTINATION_SHARE * len(proper) and not known:
        return "a place (gone to, at or from)"
    if len(words) == 1 and not known:
        low = usage.lower[head.lower()]
        if low >= 3 and low >= COMMON_SHARE * (low + usage.capital[head]):
            return "a common word written with a capital"
    after_article = sum(1 for m in proper if m.start > 0 and book.tokens[m.start - 1].word.lower() in ARTICLES)
    titled = _plain(c.name.split()[0]) in PLAIN_TITLES  # "the Reverend Archibald Jones"
    first_name = any(_known_name(w) for w in words)
    if proper and not (titled or first_name) and not any(_in_role(tokens, m) for m in proper):
        return "never a subject, object or owner (an exclamation, or a place after a preposition)"
    if proper and after_article >= ARTICLE_SHARE * len(proper) and after_article >= 2 and not titled and not (
            len(words) == 1 and known):
        return "a noun with an article"
    return None


def _in_role(tokens: list, m) -> bool:
    """Whether a proper mention is one a person fills (ROLES), or is addressed: a noun phrase after a comma that
    spaCy attaches as an adverbial modifier (", Watson, that you have")."""
    dep = tokens[m.end].dep
    return dep in ROLES or dep == "npadvmod" and m.start > 0 and tokens[m.start - 1].word == ","


def _merged(book: Book, people: list[int], usage: _Usage) -> dict[int, int]:
    """member -> representative for clusters of one person: the same name twice; a single untitled first name (or
    its nickname) that exactly one titled person carries ("Harry" -> "Lord Henry"); and a one-word name, titled or
    not, that exactly one other person's names hold ("Quatermain" -> "Allan Quatermain", "Mr. Hallward" -> "Basil
    Hallward", "Aunt Agatha" -> "Lady Agatha"), where their titles' or first names' genders agree and no first name
    of its own says it is someone else ("Curtis; George Curtis" is not "Sir Henry Curtis")."""
    chars = book.characters
    into: dict[int, int] = {}
    by_name: dict[str, int] = {}
    for cid in people:  # most mentioned first: it represents
        key = chars[cid].name.lower()
        if key in by_name:
            into[cid] = by_name[key]
        else:
            by_name[key] = cid
    table = nicknames()
    titled = [cid for cid in people if cid not in into and _titled(chars[cid].aliases)]
    for cid in people:
        if cid in into or _titled(chars[cid].aliases):
            continue
        words = name_words(chars[cid].name)
        if len(words) != 1:
            continue
        forms = {words[0].lower()} | table.get(words[0].lower(), set())
        bearers = [t for t in titled if t != cid and any(
            w.lower() in forms for a in chars[t].aliases if _titled([a]) for w in name_words(a)[:1])]
        said = _said_gender(chars[cid].aliases)  # (what its titles or kinship words say, not its pronouns)
        bearers = [t for t in bearers if not said or _said_gender(chars[t].aliases) in (None, said)]  # ("Daddy
        #                                                                        Bernier" is not Madame Bernier)
        bearers = [t for t in bearers if not _other_surname(chars[cid].aliases, chars[t].aliases)]  # ("Jenny Lind
        #                                                                        Randall" is not Aunt Jane)
        if len(bearers) == 1 and chars[bearers[0]].count > chars[cid].count:  # (a bigger one is someone else)
            into[cid] = bearers[0]
    _merge_by_name_word(book, [c for c in people if c not in into], into, usage)
    _merge_variants(book, [c for c in people if c not in into], into)
    _merge_said_aliases(book, people, into)
    return into


def _other_surname(aliases: list[str], bearer: list[str]) -> bool:
    """Whether some full name among `aliases` ends in a word none of the bearer's names holds: its own surname."""
    held = {w.lower() for a in bearer for w in name_words(a)}
    return any(len(ws) > 1 and ws[-1].lower() not in held for ws in (name_words(a) for a in aliases))


def _married(aliases: list[str]) -> bool:
    """Whether every name is a woman's title and a surname alone ("Mrs. Milliken", "Miss Sawyer"): a wife or
    daughter of the family, so not the man who bears the surname ("Deacon Milliken"), only a woman."""
    return all(len(a.split()) == 2 and a.split()[0].lower() in FEMALE_TITLES for a in aliases)


def _a_woman(gender: str | None, aliases: list[str]) -> bool:
    """Whether a person is a woman: by her gender, or, where none is known, by her first name's he/she count in
    Gutenberg's books leaning to she ("Cherry Malotte" is, "Deacon Milliken" is not)."""
    if gender:
        return gender == "female"
    firsts = {ws[0].lower() for ws in map(name_words, aliases) if len(ws) > 1}
    he = sum(gender_table().get(w, (0.0, 0.0))[0] for w in firsts)
    she = sum(gender_table().get(w, (0.0, 0.0))[1] for w in firsts)
    return she > he


def _initials(aliases: list[str]) -> str:
    """A name written as two or more initials ("R. L. S.", "L. D. M."): its letters; "" otherwise."""
    for a in aliases:
        ws = name_words(a)
        if len(ws) > 1 and all(len(w.rstrip(".")) == 1 for w in ws):
            return "".join(w[0].lower() for w in ws)
    return ""


def _spelled_alike(a: str, b: str) -> bool:
    """Two spellings of one name ("Miranda" and "Mirandy", "Filleul" and "Filluel"): six letters or more, at most
    one letter apart in length, alike by difflib's ratio (SPELLING_RATIO), and not a plural beside its singular."""
    from difflib import SequenceMatcher
    a, b = a.lower(), b.lower()
    if a.rstrip("s") == b.rstrip("s") or {a[-3:], b[-3:]} == {"man", "men"} and a[:-3] == b[:-3]:
        return False  # a family beside one of it ("the Beverleys", "Mrs Beverley"), a people ("Englishmen")
    return a != b and min(len(a), len(b)) >= 6 and abs(len(a) - len(b)) <= 1 \
        and SequenceMatcher(None, a, b).ratio() >= SPELLING_RATIO


def _co_mentioned(book: Book, x: int, y: int) -> int:
    """How many sentences mention both clusters: two people, where they are many (a name and its alias seldom
    share a sentence)."""
    at: dict[int, set[int]] = {}
    for m in book.mentions:
        if m.char_id in (x, y):
            at.setdefault(m.char_id, set()).add(book.tokens[m.start].sentence)
    return len(at.get(x, set()) & at.get(y, set()))


def _merge_variants(book: Book, people: list[int], into: dict[int, int]) -> None:
    """Join two people whose names are two spellings of one (`_spelled_alike`, by their names' words without titles)
    or whose initials spell one person's full name ("L. D. M." and "Lorenzo de Medici Randall"), where exactly one
    person fits, the genders do not disagree and they share no more than CO_MENTIONED sentences."""
    chars = book.characters
    words = {c: [w for w in name_words(chars[c].name) if w.lower() not in KIN] for c in people}
    for cid in people:
        letters = _initials(chars[cid].aliases)
        if len(words[cid]) != 1 and not letters:
            continue
        fits = set()
        for p in people:
            if p == cid or _root(into, p) == _root(into, cid):
                continue
            if letters:
                spelled = any(len(ws) >= len(letters) and "".join(w[0].lower() for w in ws).startswith(letters)
                              for ws in (name_words(a) for a in chars[p].aliases) if not _initials([" ".join(ws)]))
            else:
                spelled = len(words[p]) == 1 and _spelled_alike(words[cid][0], words[p][0])
            if spelled:
                fits.add(_root(into, p))
        if len(fits) != 1:
            continue
        other = fits.pop()
        ga, gb = _gender(book, cid), _gender(book, other)
        if ga and gb and ga != gb or _co_mentioned(book, cid, other) > CO_MENTIONED:
            continue
        _join(book, into, cid, other)


def said_aliases(book: Book, people: set[int]) -> Counter:
    """(a, b) -> how often the book says the two clusters' names are one person's: two proper names of people in a
    sentence with only an alias phrase between them (ALIAS_SAID: "Umbopa, or rather Ignosi"; ALIAS_OR: "Larsan, or
    Ballmeyer," counted half, or whole after a quoted name), or a name called by another ("They called Good
    'Bougwan'"). Pairs are ordered by id."""
    said: Counter = Counter()
    props = sorted((m for m in book.mentions if m.prop == "PROP" and m.char_id in people), key=lambda m: m.start)
    tokens = book.tokens
    for m1, m2 in zip(props, props[1:]):
        if m1.char_id == m2.char_id or m2.start - m1.end > 6 or tokens[m2.start].sentence != tokens[m1.end].sentence:
            continue
        gap = [tokens[i].word for i in range(m1.end + 1, m2.start)]
        quoted = any(w in QUOTES for w in gap)
        text = " ".join(w.lower() for w in gap if w not in QUOTES).replace(" ,", ",")
        text = ", " + text[1:].strip() if text.startswith(",") else text
        after = tokens[m2.end + 1].word if m2.end + 1 < len(tokens) else ""
        before = tokens[m1.start - 1].word.lower() if m1.start else ""
        pair = tuple(sorted((m1.char_id, m2.char_id)))
        corrected = text == "--" and [t.word.lower() for t in tokens[m2.end + 1:m2.end + 4]] == [",", "i", "mean"]
        if text in ALIAS_SAID or corrected or (text == "" and quoted and before in ("called", "named")):
            said[pair] += 2
        elif text in ALIAS_OR and after in (",", ";", ")", "--", "."):
            said[pair] += 2 if quoted else 1
    return said


def _merge_said_aliases(book: Book, people: list[int], into: dict[int, int]) -> None:
    """Join two people the book says are one (`said_aliases`: said once, or "X, or Y," twice), where their genders do
    not disagree: Umbopa and Ignosi, Good and Bougwan, Larsan and Ballmeyer."""
    for (x, y), n in sorted(said_aliases(book, set(people)).items()):
        if n < 2:
            continue
        ga, gb = _gender(book, _root(into, x)), _gender(book, _root(into, y))
        if not (ga and gb and ga != gb):
            _join(book, into, x, y)


def _root(into: dict[int, int], c: int) -> int:
    """The representative a cluster is joined under so far (itself if none)."""
    while c in into:
        c = into[c]
    return c


def _join(book: Book, into: dict[int, int], x: int, y: int) -> None:
    """Two clusters' people as one, under whichever is mentioned more (its members follow)."""
    a, b = sorted([_root(into, x), _root(into, y)], key=lambda c: (-book.characters[c].count, c))
    if a == b:
        return
    into[b] = a
    for m in [m for m, r in into.items() if r == b]:
        into[m] = a


def _gender(book: Book, cid: int) -> str | None:
    """A cluster's gender by its titles (or kinship words: "Mamma"), else by its first names in Gutenberg's he/she
    table (clear cases only), else by the pronouns the engine resolved to it."""
    aliases = book.characters[cid].aliases
    said = title_gender(aliases)
    if said:
        return said
    kin = _kin_genders(aliases)
    if len(kin) == 1:
        return kin.pop()
    votes = Counter()
    for a in aliases:
        words = name_words(a)
        if len(words) > 1:
            he, she = gender_table().get(words[0].lower(), (0.0, 0.0))
            if he + she >= NAME_REFERENCES and max(he, she) >= 0.9 * (he + she):
                votes["male" if he > she else "female"] += 1
    if len(votes) == 1:
        return votes.most_common(1)[0][0]
    return book.characters[cid].gender if book.characters[cid].gender in ("male", "female") else None  # its pronouns'


def _kin_genders(aliases: list[str]) -> set[str]:
    """The genders the kinship words before its names give ("Mamma Valerius": female)."""
    return {KIN[a.split()[0].lower()] for a in aliases if len(a.split()) > 1 and a.split()[0].lower() in KIN}


def _said_gender(aliases: list[str]) -> str | None:
    """The gender a cluster's titles or kinship words give ("Madame Bernier", "Daddy Bernier"), None if none do or
    they disagree."""
    said = {title_gender(aliases)} | _kin_genders(aliases)
    said.discard(None)
    return said.pop() if len(said) == 1 else None


def _titled_or_kin(name: str) -> bool:
    first = name.split()[0].lower() if name.split() else ""
    return len(name.split()) > 1 and (first in KIN or first in MALE_TITLES | FEMALE_TITLES)


def _merge_by_name_word(book: Book, people: list[int], into: dict[int, int], usage: _Usage) -> None:
    """The one-word-name rule of `_merged`: each such cluster joins the one other person whose names hold its word
    (merging into whichever of the two is mentioned more)."""
    chars = book.characters
    names = {c: {tuple(w.lower() for w in name_words(a) if w.lower() not in KIN and w.lower() not in PARTICLES)
                 for a in chars[c].aliases} - {()}
             for c in people}  # (kinship words are titles here: "Mamma Valerius" is a Valerius, named by no first name;
    #                            a surname's particle is part of it: "Da Silvestra" is a Silvestra)
    firsts = {c: {n[0] for n in ns if len(n) > 1} for c, ns in names.items()}
    genders = {c: _gender(book, c) for c in people}

    def root(c: int) -> int:
        return _root(into, c)

    _merge_short_first_names(book, people, names, genders, into)
    for cid in people:
        words = [w for w in name_words(chars[cid].name) if w.lower() not in KIN.keys() | PARTICLES]  # "Marse Percy": a
        #                                                                  Percy; "Da Silvestra": a Silvestra
        if len(words) != 1 or cid in into:  # (joined already: its person is found)
            continue
        word = words[0].lower()
        bearers = {root(p) for p in people if p != cid and (any(word in n for n in names[p] if len(n) > 1)
                                                            or (word,) in names[p] and _titled_or_kin(chars[p].name))}
        bearers.discard(root(cid))
        fits = [b for b in bearers if (not genders[cid] or not genders.get(b) or genders[cid] == genders[b])
                and firsts[cid] <= firsts.get(b, set()) | {word}]
        if _married(chars[cid].aliases):  # a wife or daughter: only a woman
            fits = [b for b in fits if _a_woman(genders.get(b), chars[b].aliases)]
        fits = [b for b in fits if not _second_first_name(word, chars[b].name, usage)]
        bare = [b for b in fits if not firsts.get(b)]
        same = {g for g in [genders[cid], *(genders.get(b) for b in bare)] if g}
        if len(fits) > 1 and bare and not firsts[cid] and _any_title(chars[cid].aliases) and len(same) == 1 \
                and genders[cid]:
            fits = bare  # titles of one surname and one gender, none with a first name: one person ("Monsieur
            #              Stangerson", "Professor Stangerson", "M. Stangerson"; William Stangerson stays apart)
        elif len(fits) != 1:
            continue  # nobody, or several (a family: "Mr. Driscoll" among Tom, Percy and York Driscoll)
        for other in fits:
            _join(book, into, cid, other)


def _second_first_name(word: str, name: str, usage: _Usage) -> bool:
    """Whether `word` is a second first name in the bearer's name ("Jane" in "Emma Jane", "Emma Jane Perkins"): after
    a first name Gutenberg's he/she table knows and the book does not write in lower case ("Old Jacob" is a Jacob),
    and not the surname (the last word, unless both words are known first names)."""
    n = [w.lower() for w in name_words(name)]
    if word not in n[1:]:
        return False
    i = n.index(word, 1)
    return _known_name(n[i - 1]) and not _common(n[i - 1].capitalize(), usage) and (
        i < len(n) - 1 or len(n) == 2 and _known_name(word))


def _merge_short_first_names(book: Book, people: list[int], names: dict, genders: dict, into: dict) -> None:
    """"Pem Howard" is "Pembroke Howard": two names with the same last word whose first names are one the start (3
    letters or more) of the other, where exactly one person's names fit so and the genders do not disagree."""
    for cid in people:
        short = [n for n in names[cid] if len(n) == 2 and len(n[0]) >= 3]
        fits = {_root(into, p) for p in people if p != cid for n in names[p] for s in short
                if len(n) == 2 and n[1] == s[1] and n[0] != s[0] and n[0].startswith(s[0])}
        fits.discard(_root(into, cid))
        if len(fits) != 1:
            continue
        other = fits.pop()
        if genders[cid] and genders.get(other) and genders[cid] != genders[other]:
            continue
        _join(book, into, cid, other)


def proper_mentions(book: Book) -> dict[int, list]:
    """Character id -> its proper-name mentions, in book order."""
    proper: dict[int, list] = {}
    for m in book.mentions:
        if m.prop == "PROP":
            proper.setdefault(m.char_id, []).append(m)
    return proper


def person_features(book: Book, cid: int, usage: _Usage, proper: dict[int, list]) -> dict[str, float]:
    """What the fitted person rule reads of one cluster (`whoqa.ranker.person.features`)."""
    c = book.characters[cid]
    return features(book, cid, proper.get(cid, []), usage.lower, usage.capital, name_words(c.name),
                    _any_title(c.aliases))


def cast_of(book: Book, fit: PersonFit | None = None) -> Cast:
    """The book's cast (computed once per loaded book, by the rules alone). `fit`: a fitted person rule that also
    reads the rules' survivors (`whoqa.ranker.person`; measured by `whoqa eval-cast --labels --fit-person`, not
    served), computed anew each call."""
    if getattr(book, "_cast", None) is not None and fit is None:
        return book._cast
    usage = _Usage.of(book)
    proper = proper_mentions(book)
    order = sorted(book.characters, key=lambda c: (-book.characters[c].count, c))
    dropped = {}
    words = {w for c in book.characters.values() for a in c.aliases for w in name_words(a)}
    for cid in order:
        why = _not_a_person(book, cid, usage, proper.get(cid, []), words)
        if not why and fit is not None and proper.get(cid):
            p = fit.p_person(person_features(book, cid, usage, proper))
            if p < fit.threshold:
                why = f"how the book uses the name says it is no person ({p:.0%} by the fitted rule)"
        if why:
            dropped[cid] = why
    people = [c for c in order if c not in dropped]
    into = _merged(book, people, usage)
    groups = {c: [c] for c in people if c not in into}
    for m, r in into.items():
        while r in into:  # "Holmes" -> "Holmes" -> "Mr. Holmes"
            r = into[r]
        groups[r].append(m)
    genders = {r: title_gender([a for m in ms for a in book.characters[m].aliases]) or book.characters[r].gender
               for r, ms in groups.items()}
    cast = Cast(groups, {r: book.characters[r].name for r in groups}, dropped, genders)
    if fit is None:
        book._cast = cast
    return cast
