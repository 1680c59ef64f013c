"""Inputs of the memory network: token ids of questions, context sentences (keys), their characters (values) and
each book's candidate characters, from the artifacts of `prepare` (books, word vectors, artificial questions) and
`index` (contexts). Per-book arrays are cached under WS/memdata/<id>.npz (built once; a book is read only there).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from whoqa.core.artifacts import forget_checksum, load_binary, record_checksum
from whoqa.core.book import Book
from whoqa.core.store import load_vectors, load_who_set, read_artificial, read_state, scoped
from whoqa.core.query import Query
from whoqa.core.workspace import Workspace
from whoqa.core.seed import SEED
from whoqa.core.book import POSSESSIVE_TAGS, span_head
from dataclasses import fields
from whoqa.core.aliases import AliasIndex
from whoqa.retrieval.contexts import load_contexts, question_context

log = logging.getLogger(__name__)
MAX_SENTENCE = 60  # tokens kept per key sentence
MAX_VALUES = 8  # characters kept per sentence


class Vocab:
    """Token -> row of the embedding matrix; row 0 is padding, unknown tokens are dropped."""

    def __init__(self, workspace: Path):
        wv = load_vectors(workspace)
        self.index = {w: i + 1 for i, w in enumerate(wv.index_to_key)}
        self.matrix = torch.cat([torch.zeros(1, wv.vector_size), torch.from_numpy(wv.vectors.copy())])  # (V+1, d)
        state = read_state(workspace)
        self.lineage, self.books = state["lineage"], set(state["books"])

    def record(self) -> dict:
        """What a model saves of the vectors it was trained on."""
        return {"lineage": self.lineage, "rows": int(self.matrix.shape[0])}

    def identity(self) -> dict:
        """What a run depends on of the vectors: their lineage. Books folded in later add rows but never move one, so
        they leave a pretraining or a cross-validation run what it was."""
        return {"lineage": self.lineage}

    def ids(self, tokens: list[str]) -> list[int]:
        return [self.index[t] for t in tokens if t in self.index]


@dataclass
class BookArrays:
    sentences: np.ndarray  # (n_sentences, MAX_SENTENCE) token ids, 0-padded
    values: np.ndarray  # (n_sentences, MAX_VALUES) character token ids, 0-padded
    candidates: np.ndarray  # (n_characters,) token ids of the book's characters
    char_ids: np.ndarray  # (n_characters,) the characters' ids in the book
    counts: np.ndarray | None = None  # (n_characters,) their mentions in the book (None: unknown, all equal)
    roles: np.ndarray | None = None  # (n_sentences, MAX_VALUES) each value's ROLES code in its sentence, 0 padding

    def salience(self) -> np.ndarray:
        """(n_characters,) log mentions relative to the book's most mentioned character: 0 for it, < 0 for the rest."""
        if self.counts is None or not len(self.counts):
            return np.zeros(len(self.candidates), dtype=np.float32)
        logc = np.log1p(self.counts.astype(np.float32))
        return logc - logc.max()


ROLES = ("agent", "patient", "possessor", "other")  # codes 1..4 (0: padding)
AGENT_DEPS = {"nsubj", "csubj"}
PATIENT_DEPS = {"dobj", "nsubjpass", "dative", "iobj", "oprd"}


def mention_role(book: Book, m) -> int:
    """ROLES code of a mention from its head word's dependency: subject (or the object of a passive's "by") ->
    agent; object or passive subject -> patient; possessive -> possessor."""
    tok = book.tokens[span_head(book.tokens, m.start, m.end)]
    if tok.dep in AGENT_DEPS or (tok.dep == "pobj" and book.tokens[tok.head].dep == "agent"):
        return 1
    if tok.dep in PATIENT_DEPS:
        return 2
    if tok.dep == "poss" or tok.tag in POSSESSIVE_TAGS:
        return 3
    return 4


def sentence_roles(book: Book, sid: int) -> dict[int, int]:
    """Each character a sentence mentions -> its strongest ROLES code there (agent first), in order of first
    mention: the values of a memory, in both networks."""
    role: dict[int, int] = {}
    for m in book.sentence_mentions(sid):
        role[m.char_id] = min(role.get(m.char_id, len(ROLES)), mention_role(book, m))
    return role


def book_arrays(workspace: Path, book_id: str, vocab: Vocab) -> BookArrays:
    cache = Workspace(workspace).memory_arrays(vocab.lineage, book_id)  # ids stay valid while the vectors grow
    if cache.is_file():
        try:
            z = load_binary(cache, np.load, "rebuilt from the book")
            if "roles" in z:  # caches written before counts and roles were kept are rebuilt
                return BookArrays(z["sentences"], z["values"], z["candidates"], z["char_ids"], z["counts"], z["roles"])
        except Exception as e:  # a damaged cache is rebuilt from the book
            log.warning("%s is damaged (%s): rebuilt from the book", cache, type(e).__name__)
    book = Book.load(Workspace(workspace).books / book_id, book_id)
    n = len(book.sentences)
    sent = np.zeros((n, MAX_SENTENCE), dtype=np.int32)
    vals = np.zeros((n, MAX_VALUES), dtype=np.int32)
    roles = np.zeros((n, MAX_VALUES), dtype=np.int8)
    for s in range(n):
        ids = vocab.ids([scoped(t, book_id) for t in book.replaced_sentence(s)])[:MAX_SENTENCE]
        sent[s, :len(ids)] = ids
        role = sentence_roles(book, s)
        kept = [(t, role[c]) for c in role for t in vocab.ids([scoped(f"CHAR_{c}", book_id)])][:MAX_VALUES]
        vals[s, :len(kept)] = [t for t, _ in kept]
        roles[s, :len(kept)] = [r for _, r in kept]
    chars = sorted(book.characters)
    toks = [vocab.index.get(scoped(f"CHAR_{c}", book_id), 0) for c in chars]
    keep = [k for k, t in enumerate(toks) if t]
    arrays = BookArrays(sent, vals, np.array([toks[k] for k in keep], dtype=np.int32),
                        np.array([chars[k] for k in keep], dtype=np.int32),
                        np.array([book.characters[chars[k]].count for k in keep], dtype=np.int32), roles)
    if book_id not in vocab.books:  # not folded into the vectors yet: its characters have no rows, do not keep
        log.warning("book %s is not in the word vectors: run `whoqa prepare` to fold it in", book_id)
        return arrays
    if Workspace(workspace).read_only:  # (served read-only: made again by the next process)
        return arrays
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f"{cache.stem}.tmp-{os.getpid()}.npz")  # per process: two commands may build it at once
    np.savez(tmp, sentences=arrays.sentences, values=arrays.values, candidates=arrays.candidates,
             char_ids=arrays.char_ids, counts=arrays.counts, roles=arrays.roles)
    forget_checksum(cache)
    tmp.replace(cache)
    record_checksum(cache)
    return arrays


@lru_cache(maxsize=1)
def _tokenizer():
    import spacy
    return spacy.blank("en").tokenizer


def question_tokens(query: Query, book_id: str) -> list[str]:
    """A question (read in its book) as corpus tokens: spans naming a book character become its character token, the
    rest is tokenised as the books were and lowercased."""
    question = query.text
    out: list[str] = []
    pos = 0
    for s in query.spans:
        if s.ids:
            out += [t.text.lower() for t in _tokenizer()(question[pos:s.start])]
            out += [scoped(f"CHAR_{c}", book_id) for c in s.ids]
            pos = s.end
    out += [t.text.lower() for t in _tokenizer()(question[pos:])]
    return out


@dataclass
class Example:
    book: str
    question: list[int]  # token ids
    context: list[int]  # sentence ids, best first
    answers: list[int]  # character ids (book-local)
    qid: int | str = -1


@dataclass
class Batch:
    """A batch of questions from any books as padded tensors (token ids, 0 = padding)."""
    question: torch.Tensor  # (B, Lq)
    keys: torch.Tensor  # (B, M, Lk) the context sentences
    values: torch.Tensor  # (B, M, Lv) their characters
    candidates: torch.Tensor  # (B, C) the book's characters
    correct: torch.Tensor  # (B, C) bool
    cand_chars: torch.Tensor  # (B, C) book-local character ids (-1 padding)
    mentions: torch.Tensor  # (B, M, C) bool: memory m mentions candidate c
    book_salience: torch.Tensor  # (B, C) log mentions in the book relative to its most mentioned character
    roles: torch.Tensor  # (B, M, Lv) each value's ROLES code (0 padding)

    def to(self, device) -> "Batch":
        """The batch on a model's device."""
        return Batch(*(getattr(self, f.name).to(device) for f in fields(self)))

    @property
    def salience(self) -> tuple[torch.Tensor, torch.Tensor]:
        """What the model's salience features are computed from (see model.salience_features)."""
        return self.mentions, self.book_salience


def collate(batch: list[Example], books: dict[str, BookArrays], memories: int) -> Batch:
    """Padded tensors for a batch of questions from any books, each with its first `memories` context sentences."""
    B = len(batch)
    Lq = max(1, max(len(e.question) for e in batch))
    C = max(1, max(len(books[e.book].candidates) for e in batch))
    q = torch.zeros(B, Lq, dtype=torch.long)
    Lk = max(books[e.book].sentences.shape[1] for e in batch)
    Lv = max(books[e.book].values.shape[1] for e in batch)
    keys = torch.zeros(B, memories, Lk, dtype=torch.long)
    vals = torch.zeros(B, memories, Lv, dtype=torch.long)
    roles = torch.zeros(B, memories, Lv, dtype=torch.long)
    cands = torch.zeros(B, C, dtype=torch.long)
    correct = torch.zeros(B, C, dtype=torch.bool)
    cand_chars = torch.full((B, C), -1, dtype=torch.long)
    book_sal = torch.zeros(B, C)
    for i, e in enumerate(batch):
        arr = books[e.book]
        q[i, :len(e.question)] = torch.tensor(e.question, dtype=torch.long)
        ctx = e.context[:memories]
        if ctx:
            keys[i, :len(ctx), :arr.sentences.shape[1]] = torch.from_numpy(arr.sentences[ctx].astype(np.int64))
            vals[i, :len(ctx), :arr.values.shape[1]] = torch.from_numpy(arr.values[ctx].astype(np.int64))
            if arr.roles is not None:
                roles[i, :len(ctx), :arr.roles.shape[1]] = torch.from_numpy(arr.roles[ctx].astype(np.int64))
            else:  # unknown roles: every value "other"
                roles[i, :len(ctx)] = torch.where(vals[i, :len(ctx)] > 0, len(ROLES), 0)
        n = len(arr.candidates)
        cands[i, :n] = torch.from_numpy(arr.candidates.astype(np.int64))
        cand_chars[i, :n] = torch.from_numpy(arr.char_ids.astype(np.int64))
        correct[i, :n] = torch.from_numpy(np.isin(arr.char_ids, e.answers))
        book_sal[i, :n] = torch.from_numpy(arr.salience())
    mentions = (vals.unsqueeze(-1) == cands[:, None, None, :]).any(2) & (cands > 0)[:, None, :]  # (B, M, C)
    return Batch(q, keys, vals, cands, correct, cand_chars, mentions, book_sal, roles)


def artificial_examples(workspace: Path, book_ids: list[str], vocab: Vocab, books: dict[str, BookArrays],
                        fraction: float = 1.0, seed: int = SEED) -> list[Example]:
    rng = np.random.default_rng(seed)
    out = []
    for b in book_ids:
        path = Workspace(workspace).artificial_questions(b)
        if not path.is_file() or b not in books:
            continue
        for q in read_artificial(path):
            if fraction < 1.0 and rng.random() >= fraction:
                continue
            if q["a"] not in set(books[b].char_ids.tolist()):
                continue
            ids = vocab.ids([scoped(t, b) for t in q["q"]])
            lo, hi = q["c"]
            out.append(Example(b, ids, list(range(hi, lo - 1, -1)), [q["a"]], f"{b}:{q['s']}"))
    return out


def who_examples(workspace: Path, ranker: str, vocab: Vocab, books: dict[str, BookArrays],
                 memories: int) -> tuple[list[Example], dict]:
    """Real Who questions with their ranker's contexts; questions whose answer is not a candidate are counted."""
    ws = Workspace(workspace)
    characters, questions = load_who_set(ws)
    out, skipped = [], {"no_contexts": 0, "answer_not_candidate": 0}
    aliases, contexts = {}, {}
    for q in questions:
        b = q["document_id"]
        if b not in contexts:
            contexts[b] = load_contexts(ws, ranker, b)
            aliases[b] = AliasIndex.from_records(characters.get(b, []))
        if contexts[b] is None or b not in books:
            skipped["no_contexts"] += 1
            continue
        if not set(q["answers"]) & set(books[b].char_ids.tolist()):
            skipped["answer_not_candidate"] += 1
            continue
        ids = vocab.ids(question_tokens(Query.read(q["question"]).about(aliases[b]), b))
        out.append(Example(b, ids, question_context(contexts[b], q["question_id"], memories), q["answers"],
                           q["question_id"]))
    if any(skipped.values()):
        log.warning("Who questions left out: %s", json.dumps(skipped))
    return out, skipped


class MemoryCache:
    """Per-book memory vectors for a model whose embeddings are frozen: encoded once instead of every step."""

    def __init__(self, model, books: dict[str, BookArrays], chunk: int = 2048):
        self.vectors = {}
        self.device = model.C.weight.device
        with torch.no_grad():
            for b, arr in books.items():
                ids = lambda a, i: torch.from_numpy(a[i:i + chunk].astype(np.int64)).to(self.device)  # noqa: E731
                parts = [model.encode_memories(ids(arr.sentences, i), ids(arr.values, i))
                         for i in range(0, len(arr.sentences), chunk)]
                self.vectors[b] = tuple(torch.cat(x) for x in zip(*parts))  # (n, d), (n, d), (n,), (n,)

    def batch(self, batch: list[Example], memories: int):
        """k (B, M, d), v (B, M, d), has_char (B, M), real (B, M) for the batch's contexts (padding: not real)."""
        d = next(iter(self.vectors.values()))[0].shape[1]
        B, dev = len(batch), self.device
        k, v = torch.zeros(B, memories, d, device=dev), torch.zeros(B, memories, d, device=dev)
        has = torch.zeros(B, memories, dtype=torch.bool, device=dev)
        real = torch.zeros(B, memories, dtype=torch.bool, device=dev)
        for i, e in enumerate(batch):
            ctx = torch.tensor(e.context[:memories], dtype=torch.long, device=dev)
            if len(ctx):
                bk, bv, bh, br = self.vectors[e.book]
                n = len(ctx)
                k[i, :n], v[i, :n], has[i, :n], real[i, :n] = bk[ctx], bv[ctx], bh[ctx], br[ctx]
        return k, v, has, real
