"""A copy pointer for the FiD reader (pointer-generator, See et al. 2017): each answer token is a mixture of the
decoder's vocabulary distribution and a copy of a token of the fused passages.

Why: the bert2bert reader learns answer style but cannot spell a name it has never produced out of ten fused passages
(README: F1 about 2 on Who questions although 48% of their answers stand verbatim in the BM25F passages). With a
pointer, producing "Krag" is attending to the passage token "krag", which a bilinear match of the decoder state with
the encoder states learns quickly. Its attention is its own (query = decoder state, keys = fused encoder states), so it
works with any seq2seq model and keeps the decoder's fast attention kernels. Wordpiece names are copied piece by piece,
and positions that follow the tokens just written get a learned bonus, so the pointer continues the name it is
spelling (without it, "Krag" came out as "kragel": the copy of a continuation piece of another name).

    p(y) = sigmoid(g) * softmax(logits)[y] + sigmoid(-g) * sum_{j: ids_j = y} attention_j
    g    = gate([decoder state; attended encoder state])
    attention = softmax(q . W_k enc_j + 5 w1 [ids_{j-1} = y_{t-1}] + 5 w2 [ids_{j-2..j-1} = y_{t-2..t-1}])
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import BaseModelOutput

POINTER_FILE = "copy_pointer.pt"


class CopyPointer(torch.nn.Module):
    def __init__(self, decoder_hidden: int, encoder_hidden: int):
        super().__init__()
        self.query = torch.nn.Linear(decoder_hidden, encoder_hidden)
        self.key = torch.nn.Linear(encoder_hidden, encoder_hidden, bias=False)
        self.gate = torch.nn.Linear(decoder_hidden + encoder_hidden, 1)
        self.follow = torch.nn.Parameter(torch.full((2,), 0.2))  # x5: score bonus of positions that continue the text
        self.dims = (decoder_hidden, encoder_hidden)

    def forward(self, dec: torch.Tensor, enc: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor | None = None,
                prev: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """dec (B, A, Hd) decoder states, enc (B, T, He) fused encoder states, mask (B, T) -> copy attention over the
        fused tokens (B, A, T) in float32 and the gate logit (B, A) (> 0: generate, < 0: copy). With ids (B, T) and
        prev (B, A, 2) (the two tokens written before each step, -1 = none), positions whose preceding one (two) tokens
        are those get a learned bonus: copying continues the word it is spelling (CopyNet's selective read, simplest)."""
        # (q W_k) . enc = q . (W_k enc): the keys are never projected, so a decoding step costs O(T), not O(T He^2)
        q = self.query(dec) @ self.key.weight  # (B, A, He)
        scores = (q @ enc.transpose(1, 2)).float() * self.dims[1] ** -0.5  # (B, A, T)
        if prev is not None:
            f1 = torch.zeros_like(scores, dtype=torch.bool)  # (B, A, T): ids[j-1] == the last token written
            f1[..., 1:] = ids[:, None, :-1] == prev[..., 1:2]
            f2 = torch.zeros_like(f1)  # and ids[j-2] == the one before it
            f2[..., 2:] = f1[..., 2:] & (ids[:, None, :-2] == prev[..., 0:1])
            scores = scores + 5 * (self.follow[0] * f1 + self.follow[1] * f2)
        attn = scores.masked_fill(~mask.bool()[:, None, :], float("-inf")).softmax(-1)  # (B, A, T)
        context = attn.to(enc.dtype) @ enc  # (B, A, He)
        return attn, self.gate(torch.cat([dec, context.to(dec.dtype)], -1)).squeeze(-1).float()

    def log_probs(self, logits, dec, enc, mask, ids, prev=None) -> torch.Tensor:
        """The mixed distribution's log-probabilities (B, A, V): logits (B, A, V), ids (B, T) the fused tokens."""
        attn, g = self(dec, enc, mask, ids, prev)
        copy = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device)
        copy.scatter_add_(-1, ids[:, None, :].expand(-1, attn.shape[1], -1), attn)  # (B, A, V)
        return torch.logaddexp(F.logsigmoid(g)[..., None] + logits.float().log_softmax(-1),
                               F.logsigmoid(-g)[..., None] + copy.clamp_min(1e-30).log())

    def nll(self, logits, dec, enc, mask, ids, labels, prev=None, reduction: str = "mean") -> torch.Tensor:
        """Mean (or summed) negative log-likelihood of labels (B, A) (-100 = padding) under the mixture; only the
        targets' copy mass is summed, so no (B, A, V) copy distribution is built in training."""
        keep = labels != -100  # (B, A)
        y = labels.clamp_min(0)
        attn, g = self(dec, enc, mask, ids, prev)
        gen = logits.float().log_softmax(-1).gather(-1, y[..., None]).squeeze(-1)  # (B, A)
        copy = (attn * (ids[:, None, :] == y[..., None])).sum(-1)  # (B, A)
        logp = torch.logaddexp(F.logsigmoid(g) + gen, F.logsigmoid(-g) + copy.clamp_min(1e-30).log())
        return -(logp[keep].sum() if reduction == "sum" else logp[keep].mean())


@torch.no_grad()
def pointer_decode(model, pointer: CopyPointer, states: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor,
                   max_new_tokens: int, num_beams: int = 1, length_penalty: float = 1.0,
                   no_repeat_ngram: int = 0) -> list[list[int]]:
    """Greedy (num_beams = 1) or beam search over the mixed distribution, with the decoder's key/value cache.
    states (B, T, He), mask (B, T), ids (B, T) -> each example's answer token ids (without start and end tokens).
    Beam hypotheses are ranked by log-probability / length ** length_penalty, and no_repeat_ngram > 0 forbids writing
    an n-gram twice, both as Hugging Face's generate. Runs on the states' device; the per-example bookkeeping of the
    beams is Python on the host, moved over once per step."""
    cfg = model.generation_config
    start, eos, pad = cfg.decoder_start_token_id, cfg.eos_token_id, cfg.pad_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    b, k, device = states.shape[0], num_beams, states.device
    states, mask, ids = (t.repeat_interleave(k, 0) for t in (states, mask, ids))  # (B*K, ...)
    enc = BaseModelOutput(last_hidden_state=states)
    tokens = torch.full((b * k, 1), start, dtype=torch.long, device=device)  # (B*K, t)
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start equal: only the first is live
    hyps: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    done = [False] * b
    past = None
    for step in range(max_new_tokens):
        out = model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=tokens[:, -1:], past_key_values=past,
                    use_cache=True, output_hidden_states=True)
        past = out.past_key_values
        prev = previous_tokens(tokens[:, -2:], start)[:, -1:]  # (B*K, 1, 2)
        logp = pointer.log_probs(out.logits[:, -1:], out.decoder_hidden_states[-1][:, -1:], states, mask, ids,
                                 prev)[:, 0]
        v = logp.shape[-1]  # logp (B*K, V)
        if no_repeat_ngram > 0:
            for r, seq in enumerate(tokens.tolist()):
                logp[r, list(repeating(seq, no_repeat_ngram))] = float("-inf")
        if k == 1:  # greedy
            nxt = logp.argmax(-1)  # (B,)
            for i in range(b):
                if not done[i] and int(nxt[i]) == eos:
                    hyps[i].append((0.0, tokens[i, 1:].tolist()))
                    done[i] = True
            if all(done):
                break
            tokens = torch.cat([tokens, nxt.masked_fill(torch.tensor(done, device=device), pad)[:, None]], 1)
            continue
        top, idx = (scores.view(-1, 1) + logp).view(b, k * v).topk(2 * k, dim=1)  # (B, 2K)
        top, idx = top.cpu(), idx.cpu()  # read element by element below
        src = torch.arange(b * k).view(b, k)  # (B, K) the beam each new beam extends (host)
        nxt = torch.full((b, k), pad, dtype=torch.long)
        new = torch.full((b, k), float("-inf"))
        for i in range(b):
            if done[i]:
                continue
            j = 0
            for rank, (s, flat) in enumerate(zip(top[i].tolist(), idx[i].tolist())):
                beam, t = divmod(flat, v)
                if s == float("-inf"):
                    break
                if t == eos:
                    if rank < k:  # an end among the k best candidates closes a hypothesis
                        hyps[i].append((s / (step + 1) ** length_penalty, tokens[i * k + beam, 1:].tolist()))
                    continue
                src[i, j], nxt[i, j], new[i, j] = i * k + beam, t, s
                j += 1
                if j == k:
                    break
            hyps[i] = sorted(hyps[i], key=lambda h: -h[0])[:k]
            best_live = float(new[i].max())
            done[i] = len(hyps[i]) == k and hyps[i][-1][0] >= best_live / (step + 1) ** length_penalty
        if all(done):
            break
        order = src.view(-1).to(device)
        tokens = torch.cat([tokens[order], nxt.view(-1, 1).to(device)], 1)
        past.reorder_cache(order)
        scores = new.to(device)
    out_ids = []
    final, rows = scores.tolist(), tokens[:, 1:].tolist()
    for i in range(b):
        if not done[i]:  # ran out of length: live beams compete too
            live = [(final[i][j] / max(1, tokens.shape[1] - 1) ** length_penalty, rows[i * k + j])
                    for j in range(k) if final[i][j] > float("-inf")]
            hyps[i] = hyps[i] + live
        best = max(hyps[i], key=lambda h: h[0])[1] if hyps[i] else []
        out_ids.append([t for t in best if t != pad])
    return out_ids


def repeating(seq: list[int], n: int) -> set[int]:
    """The tokens that would make seq end with an n-gram it already contains (Hugging Face's no_repeat_ngram_size):
    without this, a copy pointer that follows what it wrote can loop ("kragullullull...")."""
    if len(seq) < n - 1:
        return set()
    prefix = seq[len(seq) - n + 1:]
    return {seq[i + n - 1] for i in range(len(seq) - n + 1) if seq[i:i + n - 1] == prefix}


def previous_tokens(decoder_inputs: torch.Tensor, start: int) -> torch.Tensor:
    """decoder inputs (B, A) (the start token, then the tokens written) -> (B, A, 2): for each step the two tokens
    written before it, -1 where there is none."""
    written = decoder_inputs.masked_fill(decoder_inputs == start, -1)
    before = torch.cat([torch.full_like(written[:, :1], -1), written[:, :-1]], 1)
    return torch.stack([before, written], -1)
