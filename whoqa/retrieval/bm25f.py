"""Context selection: rank a book's sentences for a question, then grow 5-sentence windows around the best ones.

BM25F (Angelidis et al. §3.2): a Lucene index per book, one document per sentence with two fields: `contents` (the
sentence's words, character mentions taken out) and `characters` (the ids of the characters mentioned, pronouns
included, as `char_<id>`). A question is processed the same way and ranked with true BM25F: Lucene's
CombinedFieldQuery per query term (the fields' term frequencies combined with their weights before saturation),
OR-ed together.

Contexts are written per book as WS/contexts/<ranker>/<id>.json:
    {"config": {...}, "questions": {question_id: [[first sentence, last sentence, score], ...]}}
windows in rank order, merged where they overlap, until they hold `context_sentences` sentences.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

from whoqa.core.book import Book
from whoqa.core.files import atomic_write
from whoqa.core.query import Query
from whoqa.core.registry import positive, require
from whoqa.core.workspace import Workspace


@dataclass
class RetrievalConfig:
    k1: float = 1.2
    b: float = 0.75
    words_weight: float = 1.0  # CombinedFieldQuery needs weights >= 1
    characters_weight: float = 1.0
    window: int = 5  # sentences per window: the hit with two on each side
    context_sentences: int = 150  # stored per question; the models read the first 100 (the paper's top 20 windows)
    # by default, and the context-size ablation up to 150
    pool: int = 1000  # sentences fetched from the index to build windows from

    def __post_init__(self):
        require(self, "k1", self.k1 >= 0, "0 or more")
        require(self, "b", 0 <= self.b <= 1, "between 0 and 1")
        require(self, "words_weight", self.words_weight >= 1, "at least 1 (Lucene's CombinedFieldQuery)")
        require(self, "characters_weight", self.characters_weight >= 1, "at least 1 (Lucene's CombinedFieldQuery)")
        positive(self, "window", "context_sentences", "pool")


def sentence_fields(book: Book, sid: int) -> tuple[str, str]:
    """(words without character mentions, character ids) of one sentence."""
    a, b = book.sentences[sid]
    words = [book.tokens[i].word for i in range(a, b) if i not in book.token_char]
    chars = [f"char_{m.char_id}" for m in book.sentence_mentions(sid)]
    return " ".join(words), " ".join(chars)




class Window(NamedTuple):
    """A passage of a book: its sentences first..last (inclusive) and its retrieval score. The one shape retrieval
    gives and reading, grounding, evidence and the second look take (a tuple: `a, b, score = w` reads it; stored
    contexts hold it as [first, last, score])."""
    first: int
    last: int
    score: float

    @property
    def sentences(self) -> range:
        return range(self.first, self.last + 1)

    @property
    def middle(self) -> int:
        """The sentence the retrieval hit (a window is centred on it, but where the book's edge clips it)."""
        return (self.first + self.last) // 2


def window_sentences(wins: list[Window]) -> list[int]:
    """The sentences of these windows, window by window (a sentence once)."""
    return list(dict.fromkeys(s for w in wins for s in w.sentences))


def windows(ranked: list[tuple[int, float]], n_sentences: int, total: int, width: int = 5) -> list[Window]:
    """Windows in rank order: each hit with width//2 sentences on each side (clipped at the book's edges), merged
    with earlier windows it overlaps, until the windows hold n_sentences sentences."""
    half = width // 2
    out: list[list] = []
    for sid, score in ranked:
        if not 0 <= sid < total:
            continue  # a stale hit from an index of another version of the book
        a, b = max(0, sid - half), min(total - 1, sid + half)
        hit = [w for w in out if not (b < w[0] or a > w[1])]
        if hit:
            first = hit[0]
            first[0] = min([a] + [w[0] for w in hit])
            first[1] = max([b] + [w[1] for w in hit])
            for w in hit[1:]:
                first[2] = max(first[2], w[2])
                out.remove(w)
        else:
            out.append([a, b, float(score)])
        if sum(w[1] - w[0] + 1 for w in out) >= n_sentences:
            break
    return [Window(int(a), int(b), float(score)) for a, b, score in out]


def context_sentences(wins: list[Window], limit: int) -> list[int]:
    """Sentence ids of a context in rank order, at most `limit`."""
    out: list[int] = []
    for w in wins:
        out += w.sentences
    return out[:limit]


class NothingMatched(ValueError):
    """No sentence of the book matches any content word or character of the question: an answer would come from
    nothing (every route refuses it, as one line: exit 2 in the CLI, a 4xx from the API)."""




def matches_question(index: "BM25FIndex", query: Query) -> bool:
    """Whether any sentence of the book matches a content word (or a named character) of the question."""
    return bool(index.search(query.probe, query.characters, 1))


def question_windows(index: "BM25FIndex", query: Query, total: int, cfg: RetrievalConfig) -> list[Window]:
    """A question's BM25F windows as the index stage stores them (cfg.context_sentences sentences, rank order): the
    one recipe for the contexts models are trained and judged on and the ones `ask` builds for a new question."""
    return windows(index.search(query.words, query.characters, cfg.pool), cfg.context_sentences, total, cfg.window)


class DamagedIndex(Exception):
    """A book's Lucene index whose own files Lucene cannot read (missing, cut short, corrupt): a cache derived from
    the book, so `open_book` rebuilds it. Nothing else (a missing package, a Java that will not start) is this."""


class BM25FIndex:
    """A book's sentence index in Lucene, searched with Lucene's IndexSearcher directly.

    Anserini's SimpleSearcher loads every hit's stored document (2/3 of a query's time on a 100k-word book, with 500
    hits) and then adjusts ties (`ScoreTiesAdjusterReranker`); `search` gives exactly its hits and scores, without the
    loading (tests/test_retrieval.py checks that against SimpleSearcher on real questions): 3.7x faster."""

    def __init__(self, path: Path, cfg: RetrievalConfig):
        """Open the index at `path`. Every class is loaded first, so a stack that cannot start fails before the
        index's files are read (MissingPackage); then only Lucene's words for damaged files are DamagedIndex."""
        from whoqa.retrieval.lucene import damaged_index, java, stack_error, stack_failure
        self.cfg = cfg
        reader_cls, directory, file = (java("org.apache.lucene.index.DirectoryReader"),
                                       java("org.apache.lucene.store.FSDirectory"), java("java.io.File"))
        searcher_cls, bm25 = (java("org.apache.lucene.search.IndexSearcher"),
                              java("org.apache.lucene.search.similarities.BM25Similarity"))
        sort_field = java("org.apache.lucene.search.SortField")
        # Anserini's order: score, then the id field as a string (BREAK_SCORE_TIES_BY_DOCID)
        self._sort = java("org.apache.lucene.search.Sort")(
            sort_field.FIELD_SCORE, sort_field("id", java("org.apache.lucene.search.SortField$Type").STRING_VAL))
        self._cfq = java("org.apache.lucene.sandbox.search.CombinedFieldQuery$Builder")
        self._bq = java("org.apache.lucene.search.BooleanQuery$Builder")
        self._should = java("org.apache.lucene.search.BooleanClause$Occur").SHOULD
        self._bytes = java("org.apache.lucene.util.BytesRef")
        try:  # the index's own files, read from here on
            reader = reader_cls.open(directory.open(file(str(path)).toPath()))
            self._ids = _sentence_ids(reader)
        except Exception as e:
            if damaged_index(e) or isinstance(e, (TypeError, ValueError)):  # (ValueError: a stored id unreadable)
                raise DamagedIndex((getattr(e, "classname", None) or type(e).__name__).split(".")[-1]) from e
            if stack_error(e):  # a Java class or the JVM failing, not the index
                raise stack_failure(e) from None
            raise  # anything else is not known to be damage: shown as it is, and nothing is deleted for it
        self.searcher = searcher_cls(reader.getContext())
        self.searcher.setSimilarity(bm25(cfg.k1, cfg.b))

    @staticmethod
    def build(book: Book, path: Path, threads: int = 1, replace: bool = False) -> None:
        """Index into a folder of this process's own (two processes indexing one new book never share Lucene's write
        lock), then rename it into place; if another process finished first, its index is kept and ours dropped.
        `replace`: a damaged index at `path` is replaced, and only once the new one is whole. The process's folder
        never outlives the call, whatever stops it (Java missing, a full disk)."""
        import os
        import uuid
        from whoqa.retrieval.lucene import java
        simple_indexer = java("io.anserini.index.SimpleIndexer")  # (the stack first: no folder made without it)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            tmp.mkdir(parents=True)
            indexer = simple_indexer(
                ["-input", "", "-collection", "JsonCollection", "-index", str(tmp), "-threads", str(threads),
                 "-fields", "characters", "-storeRaw"])
            docs = []
            for sid in range(len(book.sentences)):
                words, chars = sentence_fields(book, sid)
                docs.append(json.dumps({"id": str(sid), "contents": words, "characters": chars}))
            indexer.addRawDocuments(docs)
            indexer.close()
            if not replace and any(Path(path).glob("segments_*")):  # another process finished the same index first
                return
            shutil.rmtree(path, ignore_errors=True)
            try:
                tmp.rename(path)
            except OSError:  # ... or finished it just now
                if not any(Path(path).glob("segments_*")):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @staticmethod
    def ensure(book: Book, path: Path) -> None:
        """Build the book's index unless a finished one (a Lucene commit) is already there."""
        if not any(Path(path).glob("segments_*")):
            BM25FIndex.build(book, Path(path))

    def search(self, words: str, chars: str, k: int, boosts: dict[str, float] | None = None) -> list[tuple[int, float]]:
        """The k best sentences for the words and characters (BM25F over both fields); `boosts`: analysed terms whose
        score counts that many times (Lucene's BoostQuery)."""
        from whoqa.retrieval.lucene import analyzer, java
        terms = list(dict.fromkeys(analyzer().analyze(words) + chars.lower().split()))
        if not terms:
            return []
        bq = self._bq()
        for term in terms:
            cfq = self._cfq()
            cfq.addField("contents", float(self.cfg.words_weight))
            cfq.addField("characters", float(self.cfg.characters_weight))
            cfq.addTerm(self._bytes(term.encode("utf-8")))
            q = cfq.build()
            if boosts and boosts.get(term, 1.0) != 1.0:
                q = java("org.apache.lucene.search.BoostQuery")(q, float(boosts[term]))
            bq.add(q, self._should)
        hits = self.searcher.search(bq.build(), k, self._sort, True).scoreDocs
        return _adjust_ties([(self._ids[h.doc], h.score) for h in hits])


class CutIndex:
    """A book's index searched as if the book ended before sentence `cut` (`ask --upto`): hits at or after it are
    dropped, and as many more are fetched as the cut drops on average, so a question still gets its full context
    from the text before the cut. (BM25's term statistics stay the whole book's: they order hits, they show no
    text.)"""

    def __init__(self, index: BM25FIndex, cut: int, total: int):
        self.index, self.cut, self.total = index, cut, total

    def search(self, words: str, chars: str, k: int, boosts: dict[str, float] | None = None) -> list[tuple[int, float]]:
        wider = min(self.total, -(-k * self.total // max(self.cut, 1)))
        hits = self.index.search(words, chars, max(k, wider), boosts)
        kept = [(s, x) for s, x in hits if s < self.cut]
        if len(kept) < k and len(hits) >= max(k, wider):  # the cut dropped more than its share: every hit, then
            kept = [(s, x) for s, x in self.index.search(words, chars, self.total, boosts) if s < self.cut]
        return kept[:k]


def _sentence_ids(reader) -> list[int]:
    """Lucene's doc number -> sentence id. An index built in one segment by one thread holds the sentences in order
    (checked on a sample of its documents); otherwise every document's id is read (0.4 s for 6,000 sentences)."""
    n = reader.maxDoc()
    stored = reader.storedFields()
    if reader.leaves().size() == 1 and all(int(stored.document(i).get("id")) == i
                                           for i in sorted({0, n - 1, *range(0, n, max(1, n // 16))}) if n):
        return list(range(n))
    return [int(stored.document(i).get("id")) for i in range(n)]


def _adjust_ties(hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Anserini's ScoreTiesAdjusterReranker on hits in Lucene's order: scores rounded to 4 decimals (half up); a
    rounded score less than 1e-4 below the previous hit's adjusted score is a tie, lowered by 1e-6 per tie in the
    run so far (float32). Found by matching SimpleSearcher on 300k hits of 41 books' questions, then tested."""
    import math
    import numpy as np
    out, prev, ties = [], None, 0
    for sid, score in hits:
        r = float(np.float32(math.floor(score * 10000 + 0.5) / 10000.0))
        ties = ties + 1 if prev is not None and prev - r < 1e-4 else 0
        prev = float(np.float32(r - ties * 1e-6))
        out.append((sid, prev))
    return out


def index_book(workspace: Path, book_id: str, questions: list[dict], cfg: RetrievalConfig, oracle: bool = False) -> dict:
    """Build (or reuse) a book's BM25F index and write its questions' contexts. `oracle`: the query is the question
    with both its answers (Mou et al.'s "BM25 w/ Q+A" upper bound), written under WS/contexts/oracle/."""
    from whoqa.core.aliases import AliasIndex
    ws = Workspace(workspace)
    book = Book.load(ws.books / book_id, book_id)
    path = ws.book_index(book_id)
    BM25FIndex.ensure(book, path)
    idx = BM25FIndex(path, cfg)
    aliases = AliasIndex(book.characters)
    out = {}
    for q in questions:
        text = " ".join([q["question"], q["answer1"], q["answer2"]]) if oracle else q["question"]
        out[str(q["question_id"])] = question_windows(idx, Query.read(text).about(aliases), len(book.sentences), cfg)
    atomic_write(ws.contexts_file("oracle" if oracle else "bm25f", book_id),
                 json.dumps({"config": asdict(cfg), "questions": out}))
    return {"questions": len(out), "sentences": len(book.sentences)}
