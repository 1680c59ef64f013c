"""The memory network that reads instead of remembering: the paper's key-value network (sparsemax hops, a per-book
dynamic output layer) with its characters anonymised, as cloze-style reading comprehension anonymised entities
(Hermann et al. 2015), so that it answers about books it never saw.

Per question, the characters its question or memories mention get anonymous slots, drawn at random per example in
training (a fixed draw when judging), and every other candidate the shared slot OTHER. A character's vector is then
its slot's vector plus a projection of its book-level features (SLOT_FEATURES: share of the book, mentions in the
memories, named by the question, its roles there, gender): the network sees who is who in this passage and how each
stands in the book, never which character of which book it is. Words keep their frozen word2vec vectors, so a key
is the mean of its words' vectors and its characters' slot vectors:

    key_i   = (sum of word vectors_i + sum_c mult_ic slot_c) / length_i
    value_i = role-weighted mean of the slot vectors of the characters sentence i mentions   (g = 1 + tanh(G q'))
    hops    : q' = R_t q ; a = sparsemax(keys . q') ; q = q' + a . values
    scores  = (slot_c + P f_c) . C q  +  w . [f_c, attention on the memories mentioning c]

The words' sums are computed once per book (`SlotBook.word_sums`); only the slots change per example.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from whoqa.core.book import Book
from whoqa.memnet.data import MAX_SENTENCE, MAX_VALUES, ROLES, sentence_roles
from whoqa.memnet.model import NEG

SLOTS = 128  # anonymous slots per question (characters beyond them share OTHER)
SLOT_FEATURES = ("book_share", "context", "named", "agent", "patient", "male", "female")
GENDERS = {"male": 1, "female": 2}
CHAR = re.compile(r"^CHAR_(\d+)")


@dataclass
class SlotConfig:
    hops: int = 3
    slots: int = SLOTS
    roles: bool = True  # values weigh characters by their role in the sentence, as the question asks


class WordVocab:
    """Lowercased words -> rows of a frozen word-vector matrix (row 0 padding); character tokens are not words here:
    the network never sees which character a mention is."""

    def __init__(self, words: list[str], matrix: torch.Tensor):
        self.words = words
        self.index = {w: i + 1 for i, w in enumerate(words)}
        self.matrix = matrix  # (V+1, d)

    @classmethod
    def from_keyed_vectors(cls, wv) -> "WordVocab":
        keep = [i for i, w in enumerate(wv.index_to_key) if not w.startswith("CHAR_")]
        words = [wv.index_to_key[i] for i in keep]
        vectors = torch.from_numpy(np.asarray(wv.vectors)[keep].astype(np.float32))
        return cls(words, torch.cat([torch.zeros(1, vectors.shape[1]), vectors]))

    def ids(self, tokens: list[str]) -> list[int]:
        return [self.index[t.lower()] for t in tokens if t.lower() in self.index]


@dataclass
class SlotBook:
    """A book as the slot network reads it: each sentence's words and characters, and its characters' features."""
    words: np.ndarray  # (n, MAX_SENTENCE) word ids of each sentence (character tokens left out), 0-padded
    length: np.ndarray  # (n,) tokens the key averages: known words + character tokens
    chars: np.ndarray  # (n, MAX_VALUES) local index + 1 of each character the sentence mentions, 0 padding
    mult: np.ndarray  # (n, MAX_VALUES) its tokens in the sentence (a key counts each)
    roles: np.ndarray  # (n, MAX_VALUES) its strongest ROLES code there (agent first)
    char_ids: np.ndarray  # (C,) the characters' ids in the book
    counts: np.ndarray  # (C,) their mentions in the book
    gender: np.ndarray  # (C,) 0 unknown, 1 male, 2 female
    word_sums: torch.Tensor | None = field(default=None, repr=False)  # (n, d) sum of each sentence's word vectors

    def with_word_sums(self, words: torch.Tensor, chunk: int = 2048) -> "SlotBook":
        """Itself with each sentence's summed word vectors (words: the frozen (V+1, d) matrix)."""
        ids = torch.from_numpy(self.words.astype(np.int64))
        self.word_sums = torch.cat([words[ids[i:i + chunk]].sum(1) for i in range(0, len(ids), chunk)]) \
            if len(ids) else torch.zeros(0, words.shape[1])
        return self

    def local(self, char_id: int) -> int | None:
        """A character id's index into char_ids (None: not a character of the book)."""
        if not hasattr(self, "_local"):
            self._local = {int(c): i for i, c in enumerate(self.char_ids)}
        return self._local.get(int(char_id))


def slot_book(book: Book, vocab: WordVocab) -> SlotBook:
    """A Book's arrays for the slot network."""
    chars = sorted(book.characters)
    local = {c: i for i, c in enumerate(chars)}
    n = len(book.sentences)
    words = np.zeros((n, MAX_SENTENCE), dtype=np.int32)
    length = np.zeros(n, dtype=np.int32)
    cs = np.zeros((n, MAX_VALUES), dtype=np.int32)
    mult = np.zeros((n, MAX_VALUES), dtype=np.int16)
    roles = np.zeros((n, MAX_VALUES), dtype=np.int8)
    for s in range(n):
        toks = book.replaced_sentence(s)[:MAX_SENTENCE]
        ids = vocab.ids([t for t in toks if not CHAR.match(t)])
        words[s, :len(ids)] = ids
        tokens_of = Counter(int(m.group(1)) for m in map(CHAR.match, toks) if m)  # character -> its tokens
        length[s] = len(ids) + sum(tokens_of.values())
        kept = [(c, r) for c, r in sentence_roles(book, s).items() if c in local][:MAX_VALUES]
        for j, (c, r) in enumerate(kept):
            cs[s, j], mult[s, j], roles[s, j] = local[c] + 1, tokens_of.get(c, 1), r
    return SlotBook(words, length, cs, mult, roles, np.array(chars, dtype=np.int64),
                    np.array([book.characters[c].count for c in chars], dtype=np.int64),
                    np.array([GENDERS.get(book.characters[c].gender or "", 0) for c in chars], dtype=np.int64))


@dataclass
class SlotExample:
    book: str
    words: list[int]  # the question's word ids
    named: list[int]  # local indexes of the characters it names
    context: list[int]  # sentence ids, best first
    answers: list[int]  # character ids
    qid: int | str = -1


def split_question(tokens: list[str], book: SlotBook, vocab: WordVocab) -> tuple[list[int], list[int]]:
    """(word ids, local indexes of named characters) of question tokens in which a character is CHAR_<id>[@book]."""
    words, named = [], []
    for t in tokens:
        m = CHAR.match(t)
        if m:
            i = book.local(int(m.group(1)))
            if i is not None:
                named.append(i)
        else:
            words += vocab.ids([t])
    return words, named


@dataclass
class SlotBatch:
    words: torch.Tensor  # (B, Lq) the questions' word ids
    named: torch.Tensor  # (B, Ln) slot of each character the question names, 0 padding
    word_sums: torch.Tensor  # (B, M, d)
    length: torch.Tensor  # (B, M) 0 for padding memories
    values: torch.Tensor  # (B, M, Lv) slot of each character a memory mentions, 0 padding
    mult: torch.Tensor  # (B, M, Lv)
    roles: torch.Tensor  # (B, M, Lv)
    slot_feats: torch.Tensor  # (B, S+2, F) the features of the character in each slot (0 for padding and OTHER)
    cand_slot: torch.Tensor  # (B, C) each candidate's slot (OTHER for those never mentioned), 0 padding
    cand_feats: torch.Tensor  # (B, C, F)
    mentions: torch.Tensor  # (B, M, C) bool: memory m mentions candidate c
    correct: torch.Tensor  # (B, C) bool
    cand_chars: torch.Tensor  # (B, C) character ids, -1 padding

    def to(self, device) -> "SlotBatch":
        return SlotBatch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def candidate_features(book: SlotBook, context: list[int], named: list[int]) -> np.ndarray:
    """(C, F) SLOT_FEATURES of a book's characters for a question with these memories."""
    C = len(book.char_ids)
    f = np.zeros((C, len(SLOT_FEATURES)), dtype=np.float32)
    if not C:
        return f
    logc = np.log1p(book.counts.astype(np.float32))
    f[:, 0] = logc - logc.max()
    ctx, agent, patient = np.zeros(C), np.zeros(C), np.zeros(C)
    if context:
        ch, ro = book.chars[context].ravel(), book.roles[context].ravel()
        real = ch > 0
        np.add.at(ctx, ch[real] - 1, 1)
        np.add.at(agent, ch[real & (ro == 1)] - 1, 1)
        np.add.at(patient, ch[real & (ro == 2)] - 1, 1)
    f[:, 1], f[:, 3], f[:, 4] = np.log1p(ctx), np.log1p(agent), np.log1p(patient)
    f[named, 2] = 1.0
    f[:, 5], f[:, 6] = book.gender == 1, book.gender == 2
    return f


def collate(batch: list[SlotExample], books: dict[str, SlotBook], memories: int, slots: int,
            rng: np.random.Generator | None = None) -> SlotBatch:
    """Padded tensors for a batch; each example's mentioned characters drawn into slots 1..slots (at random with
    `rng`, else in order of first mention), the rest OTHER = slots + 1."""
    B, other = len(batch), slots + 1
    C = max(1, max(len(books[e.book].char_ids) for e in batch))
    Lq = max(1, max(len(e.words) for e in batch))
    Ln = max(1, max(len(e.named) for e in batch))
    d = next(iter(books.values())).word_sums.shape[1]
    F = len(SLOT_FEATURES)
    words, named = torch.zeros(B, Lq, dtype=torch.long), torch.zeros(B, Ln, dtype=torch.long)
    sums, length = torch.zeros(B, memories, d), torch.zeros(B, memories)
    values, mult = torch.zeros(B, memories, MAX_VALUES, dtype=torch.long), torch.zeros(B, memories, MAX_VALUES)
    roles = torch.zeros(B, memories, MAX_VALUES, dtype=torch.long)
    slot_feats, cand_feats = torch.zeros(B, slots + 2, F), torch.zeros(B, C, F)
    cand_slot, cand_chars = torch.zeros(B, C, dtype=torch.long), torch.full((B, C), -1, dtype=torch.long)
    correct = torch.zeros(B, C, dtype=torch.bool)
    for i, e in enumerate(batch):
        bk = books[e.book]
        ctx = e.context[:memories]
        n = len(bk.char_ids)
        seen = list(dict.fromkeys(e.named + [int(c) - 1 for c in bk.chars[ctx].ravel() if c > 0]))[:slots]
        drawn = (rng.permutation(slots)[:len(seen)] if rng is not None else np.arange(len(seen))) + 1
        slot_of = np.full(n + 1, other, dtype=np.int64)  # local index + 1 -> slot (0 -> padding 0)
        slot_of[0] = 0
        slot_of[np.array(seen, dtype=np.int64) + 1] = drawn
        feats = torch.from_numpy(candidate_features(bk, ctx, e.named))  # (n, F)
        words[i, :len(e.words)] = torch.tensor(e.words, dtype=torch.long)
        named[i, :len(e.named)] = torch.from_numpy(slot_of[np.array(e.named, dtype=np.int64) + 1])
        if ctx:
            m = len(ctx)
            sums[i, :m], length[i, :m] = bk.word_sums[ctx], torch.from_numpy(bk.length[ctx].astype(np.float32))
            values[i, :m] = torch.from_numpy(slot_of[bk.chars[ctx]])
            mult[i, :m] = torch.from_numpy(bk.mult[ctx].astype(np.float32))
            roles[i, :m] = torch.from_numpy(bk.roles[ctx].astype(np.int64))
        slot_feats[i, torch.from_numpy(drawn)] = feats[torch.tensor(seen, dtype=torch.long)]
        cand_slot[i, :n] = torch.from_numpy(slot_of[1:])
        cand_feats[i, :n] = feats
        cand_chars[i, :n] = torch.from_numpy(bk.char_ids)
        correct[i, :n] = torch.from_numpy(np.isin(bk.char_ids, e.answers))
    mentions = (values.unsqueeze(-1) == cand_slot[:, None, None, :]).any(2) & (cand_slot > 0)[:, None, :]  # (B, M, C)
    mentions &= (cand_slot != other)[:, None, :]
    return SlotBatch(words, named, sums, length, values, mult, roles, slot_feats, cand_slot, cand_feats, mentions,
                     correct, cand_chars)


class SlotMemNet(nn.Module):
    """The key-value memory network over anonymous character slots (module docstring)."""

    def __init__(self, words: torch.Tensor, cfg: SlotConfig | None = None):
        """words: (V+1, d) frozen word vectors, row 0 padding."""
        super().__init__()
        from entmax import sparsemax
        self.sparsemax = sparsemax
        self.cfg = cfg or SlotConfig()
        d = words.shape[1]
        self.words = nn.Embedding.from_pretrained(words.clone().float(), freeze=True, padding_idx=0)
        scale = float(words[1:].norm(dim=1).mean()) / d ** 0.5 if len(words) > 1 else 1.0
        self.slots = nn.Parameter(torch.randn(self.cfg.slots + 2, d) * scale)  # 0 padding, 1..S slots, S+1 OTHER
        self.project = nn.Linear(len(SLOT_FEATURES), d, bias=False)
        nn.init.zeros_(self.project.weight)
        self.R = nn.ModuleList([nn.Linear(d, d, bias=False) for _ in range(self.cfg.hops)])
        self.C = nn.Linear(d, d, bias=False)
        for lin in list(self.R) + [self.C]:
            nn.init.eye_(lin.weight)
        self.role_gate = nn.Linear(d, len(ROLES) + 1, bias=False)
        nn.init.zeros_(self.role_gate.weight)
        self.value_pad = nn.Parameter(torch.zeros(d))
        self.output_w = nn.Parameter(torch.zeros(len(SLOT_FEATURES) + 1))  # features + attention, in the logits

    def forward(self, b: SlotBatch, return_attention: bool = False):
        """Scores (B, C) over each question's book's characters (padding at NEG)."""
        keep = torch.ones(self.slots.shape[0], 1, device=self.slots.device)
        keep[0] = 0  # row 0 is padding: nothing
        table = (self.slots.unsqueeze(0) + self.project(b.slot_feats)) * keep  # (B, S+2, d)
        # slots are picked by one-hot products, not indexing: index backward is a sort-based scatter under
        # torch's deterministic algorithms (set_seed), 25x slower here
        S2 = table.shape[1]
        hot = torch.nn.functional.one_hot(b.values, S2).to(table.dtype)  # (B, M, Lv, S2)
        named = torch.nn.functional.one_hot(b.named, S2).to(table.dtype).sum(1)  # (B, S2)
        qw, qn = b.words > 0, b.named > 0
        q = (self.words(b.words).sum(1) + torch.einsum("bs,bsd->bd", named, table)) / (
            qw.sum(1) + qn.sum(1)).clamp(min=1).unsqueeze(-1)  # (B, d)
        in_key = torch.einsum("bml,bmls->bms", b.mult, hot)  # (B, M, S2) each slot's tokens in each key
        keys = (b.word_sums + torch.bmm(in_key, table)) / b.length.clamp(min=1).unsqueeze(-1)  # (B, M, d)
        real, has = b.length > 0, (b.values > 0).any(-1)  # (B, M)
        n_vals = (b.values > 0).sum(-1, keepdim=True).clamp(min=1)  # (B, M, 1)
        any_mem = real.any(-1, keepdim=True)
        plain = torch.bmm(hot.sum(2) / n_vals, table)  # (B, M, d) plain mean of each memory's characters
        role_hot = torch.nn.functional.one_hot(b.roles, len(ROLES) + 1).to(table.dtype)  # (B, M, Lv, R+1)
        attn = []
        for R in self.R:
            q = R(q)
            a = self.sparsemax(torch.einsum("bmd,bd->bm", keys, q).masked_fill(~real, NEG), dim=-1) * any_mem
            attn.append(a)
            if self.cfg.roles:
                g = 1 + torch.tanh(self.role_gate(q))  # (B, R+1)
                w = torch.einsum("bmlr,br->bml", role_hot, g) * (b.values > 0)  # (B, M, Lv)
                v = torch.bmm(torch.einsum("bml,bmls->bms", w, hot) / n_vals, table)  # (B, M, d)
            else:
                v = plain
            v = torch.where(has.unsqueeze(-1), v, self.value_pad.expand_as(v))  # (B, M, d)
            q = q + torch.einsum("bm,bmd->bd", a, v)
        cand = torch.nn.functional.one_hot(b.cand_slot, S2).to(table.dtype) @ self.slots + self.project(
            b.cand_feats)  # (B, C, d)
        attention = torch.stack(attn, 1)  # (B, hops, M)
        attended = torch.einsum("bm,bmc->bc", attention.mean(1), b.mentions.float())  # (B, C)
        extra = torch.cat([b.cand_feats, attended.unsqueeze(-1)], -1) @ self.output_w  # (B, C)
        scores = torch.einsum("bcd,bd->bc", cand, self.C(q)) + extra
        scores = scores.masked_fill(b.cand_slot == 0, NEG)
        return (scores, attention) if return_attention else scores
