"""Key-value memory network with sparsemax attention and a per-book dynamic output layer (Angelidis et al. §3.3).

    q0      = mean of the question's word vectors
    keys    = mean word vectors of the context sentences            (mentions are character tokens: CHAR_3@book)
    values  = mean vector of the characters each sentence mentions (a learned padding vector when it has none)
    hop t:    q't = R_t q_t ;  a_t = sparsemax(keys . q't) ;  o_t = sum_i a_t,i values_i ;  q_t+1 = q't + o_t
    scores  = candidates . C q_h      over the characters of the question's own book (the dynamic output layer)
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


@dataclass
class MemNetConfig:
    hops: int = 3
    train_embeddings: bool = False  # fixed in fine-tuning (paper); trainable during pretraining


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
                candidates: torch.Tensor, return_attention: bool = False, memories: tuple | None = None):
        """question (B, Lq), keys (B, M, Lk), values (B, M, Lv), candidates (B, C): token ids, 0 = padding; or
        memories = encode_memories(...) already computed (then keys/values are unused).
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
            q = q + torch.einsum("bm,bmd->bd", a, v)  # (B, d)
        out = self.C(q)  # (B, d)
        c = self.embed(candidates)  # (B, C, d)
        scores = torch.einsum("bcd,bd->bc", c, out).masked_fill(candidates == 0, NEG)  # (B, C)
        if return_attention:
            return scores, torch.stack(attn, 1)  # (B, hops, M)
        return scores


def nll(scores: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """Negative log of the summed probability of the correct candidates.
    scores (B, C), correct (B, C) bool with at least one true per row -> scalar."""
    logp = torch.log_softmax(scores, dim=-1)  # (B, C)
    picked = logp.masked_fill(~correct, NEG)  # (B, C)
    return -torch.logsumexp(picked, dim=-1).mean()
