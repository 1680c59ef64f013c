"""Key-value memory network with sparsemax attention and a per-book dynamic output layer (Angelidis et al. §3.3).

    q0      = mean of the question's word vectors
    keys    = mean word vectors of the context sentences            (mentions are character tokens: CHAR_3@book)
    values  = mean vector of the characters each sentence mentions (a learned padding vector when it has none)
    hop t:    q't = R_t q_t ;  a_t = sparsemax(keys . q't) ;  o_t = sum_i a_t,i values_i ;  q_t+1 = q't + o_t
    scores  = candidates . C q_h      over the characters of the question's own book (the dynamic output layer)
            + w . salience(candidate)   (optional, not in the paper: evidence the vectors do not carry, see SALIENCE)
With roles, a memory's value is not the plain mean of its characters' vectors: each is weighted by
    g_t = 1 + tanh(G q't)[role]   (role: agent, patient, possessor, other in that sentence; G starts at 0, so g = 1)
so "who did X" can draw on the sentences' agents and "who was X'd" on their patients.
All parameters but the candidate set are shared across books. Trained with the negative log-likelihood of the
correct characters (summed probability when a question has several).

Masks use a large finite negative, never -inf (sparsemax/softmax turn -inf rows into NaN), and rows with every
memory masked get zero attention.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

NEG = -1e4  # masked score: finite, far below any real score
N_ROLES = 4  # agent, patient, possessor, other (data.ROLES); code 0 is padding


SALIENCE = (
    "book",  # log mentions in the book, relative to its most mentioned character (book frequency's evidence)
    "context",  # log(1 + context sentences mentioning it)
    "first",  # 1 / (1 + rank of the first context sentence mentioning it); 0 when none does (recency, for artificial)
    "attended",  # attention (mean over hops) on the sentences mentioning it
    "named",  # the question names it (a character is rarely the answer to a question about them)
)


@dataclass
class MemNetConfig:
    hops: int = 3
    train_embeddings: bool = False  # fixed in fine-tuning (paper); trainable during pretraining
    salience: bool = False  # add learned weights on SALIENCE features to the output layer
    roles: bool = False  # values weigh each character by its role in the sentence, as the question asks (ROLE_GATE)


def salience_features(question: torch.Tensor, candidates: torch.Tensor, mentions: torch.Tensor,
                      book_salience: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
    """The SALIENCE features of every candidate.
    question (B, Lq), candidates (B, C), mentions (B, M, C) bool, book_salience (B, C), attention (B, hops, M)
    -> (B, C, len(SALIENCE))."""
    m = mentions.to(book_salience.dtype)  # (B, M, C)
    rank = torch.arange(m.shape[1], dtype=m.dtype, device=m.device)  # (M,)
    first = (m / (1 + rank)[None, :, None]).amax(1) if m.shape[1] else torch.zeros_like(book_salience)  # (B, C)
    attended = torch.einsum("bm,bmc->bc", attention.mean(1), m)  # (B, C)
    named = ((candidates.unsqueeze(-1) == question.unsqueeze(1)).any(-1) & (candidates > 0)).to(m.dtype)  # (B, C)
    return torch.stack([book_salience, torch.log1p(m.sum(1)), first, attended, named], -1)  # (B, C, F)


def masked_mean(vectors: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the second-to-last axis where mask is true; zeros where nothing is unmasked.
    vectors (..., L, d), mask (..., L) -> (..., d)."""
    m = mask.unsqueeze(-1).to(vectors.dtype)  # (..., L, 1)
    return (vectors * m).sum(-2) / m.sum(-2).clamp(min=1.0)


class KVMemNet(nn.Module):
    def __init__(self, embeddings: torch.Tensor, cfg: MemNetConfig | None = None):
        """embeddings: (vocab, d) with row 0 the padding row (ignored by every mean)."""
        super().__init__()
        from entmax import sparsemax
        self.sparsemax = sparsemax
        self.cfg = cfg or MemNetConfig()
        d = embeddings.shape[1]
        self.embed = nn.Embedding.from_pretrained(embeddings.clone().float(), freeze=not self.cfg.train_embeddings,
                                                  padding_idx=0)
        self.R = nn.ModuleList([nn.Linear(d, d, bias=False) for _ in range(self.cfg.hops)])
        self.C = nn.Linear(d, d, bias=False)
        self.value_pad = nn.Parameter(torch.zeros(d))
        for lin in list(self.R) + [self.C]:
            nn.init.eye_(lin.weight)  # start as the identity: hop 0 compares question and keys directly
        self.extend(self.cfg.salience, self.cfg.roles)

    def extend(self, salience: bool, roles: bool) -> None:
        """Add (or drop) the salience weights and the role gate, e.g. on a model pretrained without them. Added at
        zero, so the scores are unchanged until trained."""
        d = self.C.weight.shape[0]
        if salience and not hasattr(self, "salience_w"):
            self.salience_w = nn.Parameter(torch.zeros(len(SALIENCE), device=self.C.weight.device))
        if roles and not hasattr(self, "role_gate"):
            self.role_gate = nn.Linear(d, N_ROLES + 1, bias=False).to(self.C.weight.device)
            nn.init.zeros_(self.role_gate.weight)
        for flag, attr in ((salience, "salience_w"), (roles, "role_gate")):
            if not flag and hasattr(self, attr):
                delattr(self, attr)
        self.cfg.salience, self.cfg.roles = salience, roles

    def role_values(self, q: torch.Tensor, values: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
        """Values as role-weighted means of their characters' vectors.
        q (B, d), values (B, M, Lv) ids, roles (B, M, Lv) codes -> (B, M, d)."""
        g = 1 + torch.tanh(self.role_gate(q))  # (B, R+1)
        w = torch.gather(g, 1, roles.flatten(1)).view_as(roles).to(q.dtype) * (values > 0)  # (B, M, Lv)
        n = (values > 0).sum(-1, keepdim=True).clamp(min=1)  # (B, M, 1)
        return torch.einsum("bml,bmld->bmd", w, self.embed(values)) / n  # (B, M, d)

    def set_train_embeddings(self, flag: bool) -> None:
        self.embed.weight.requires_grad_(flag)
        self.cfg.train_embeddings = flag

    def encode_memories(self, keys: torch.Tensor, values: torch.Tensor):
        """Sentence vectors, character vectors and masks of memories given as token ids.
        keys (..., M, Lk), values (..., M, Lv) -> k (..., M, d), v (..., M, d), has_char (..., M), real (..., M).
        With frozen embeddings these are constants, computed once per book (see memdata.MemoryCache)."""
        k = masked_mean(self.embed(keys), keys > 0)
        v_mask = values > 0
        v = masked_mean(self.embed(values), v_mask)
        return k, v, v_mask.any(-1), (keys > 0).any(-1)

    def forward(self, question: torch.Tensor, keys: torch.Tensor | None, values: torch.Tensor | None,
                candidates: torch.Tensor, return_attention: bool = False, memories: tuple | None = None,
                salience: tuple[torch.Tensor, torch.Tensor] | None = None, roles: torch.Tensor | None = None):
        """question (B, Lq), keys (B, M, Lk), values (B, M, Lv), candidates (B, C): token ids, 0 = padding; or
        memories = encode_memories(...) already computed (then keys/values are unused); salience = (mentions
        (B, M, C) bool, book_salience (B, C)) as `data.Batch.salience`, required when the model has salience weights;
        roles (B, M, Lv) the values' role codes, required (with values) when it has a role gate.
        Returns scores (B, C) (masked candidates at NEG) and, if asked, attention (B, hops, M)."""
        q = masked_mean(self.embed(question), question > 0)  # (B, d)
        k, v, has_char, mem_mask = memories if memories is not None else self.encode_memories(keys, values)
        v = torch.where(has_char.unsqueeze(-1), v, self.value_pad.expand_as(v))  # (B, M, d)
        any_mem = mem_mask.any(-1, keepdim=True)  # (B, 1): rows with at least one memory
        attn = []
        for R in self.R:
            q = R(q)  # (B, d)
            s = torch.einsum("bmd,bd->bm", k, q)  # (B, M)
            s = s.masked_fill(~mem_mask, NEG)
            a = self.sparsemax(s, dim=-1) * any_mem  # (B, M); all-masked rows -> zeros
            attn.append(a)
            if self.cfg.roles:
                if roles is None or values is None:
                    raise ValueError("this model weighs characters by role: pass values and roles=batch.roles")
                v = torch.where(has_char.unsqueeze(-1), self.role_values(q, values, roles), v)  # (B, M, d)
            q = q + torch.einsum("bm,bmd->bd", a, v)  # (B, d)
        out = self.C(q)  # (B, d)
        c = self.embed(candidates)  # (B, C, d)
        scores = torch.einsum("bcd,bd->bc", c, out)  # (B, C)
        attention = torch.stack(attn, 1)  # (B, hops, M)
        if self.cfg.salience:
            if salience is None:
                raise ValueError("this model weighs salience features: pass salience=batch.salience")
            feats = salience_features(question, candidates, *salience, attention)  # (B, C, F)
            scores = scores + feats @ self.salience_w  # (B, C)
        scores = scores.masked_fill(candidates == 0, NEG)  # (B, C)
        if return_attention:
            return scores, attention
        return scores


def nll(scores: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """Negative log of the summed probability of the correct candidates.
    scores (B, C), correct (B, C) bool with at least one true per row -> scalar."""
    logp = torch.log_softmax(scores, dim=-1)  # (B, C)
    picked = logp.masked_fill(~correct, NEG)  # (B, C)
    return -torch.logsumexp(picked, dim=-1).mean()
