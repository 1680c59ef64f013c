"""Issue 32's first experiment (docs/pipeline.md): do the bundled MiniLM's contextual embeddings help the pronoun
resolver rank its candidates? Teacher-forced: the rules' own history of decisions, each pronoun's candidates and
features as the resolver scored them, plus the pronoun's and each candidate's nearest mention's MiniLM vectors (first
word piece, chunks of whole sentences up to 150 words). 5 folds by document; accuracy of the top candidate.

    .venv/bin/python docs/experiments/coref_context.py ../shared/data/litbank/coref [instances.pkl]
"""
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from data_prep.engine_spacy import SpacyEngine
from data_prep.litbank import load_litbank, parse_docs, doc_folds
from data_prep.coref_learn import instances
from data_prep.coref import Weights, FEATURES
from whoqa.core.minilm import bundled_minilm
from transformers import AutoTokenizer, AutoModel
torch.manual_seed(13)
cache = Path(sys.argv[2] if len(sys.argv) > 2 else "coref_instances.pkl")
if cache.is_file():
    docs_inst = pickle.load(open(cache, "rb"))
else:
    docs = load_litbank(Path(sys.argv[1]))
    eng = SpacyEngine(); parsed = parse_docs(eng, docs, progress=False)
    tok = AutoTokenizer.from_pretrained(bundled_minilm()); enc = AutoModel.from_pretrained(bundled_minilm()).eval()
    docs_inst = []
    t0 = time.time()
    for d, p in zip(docs, parsed):
        words = [w for s in d.sentences for w in s]
        # contextual embeddings: chunks of whole sentences up to ~200 wordpieces, each word's first piece
        E = np.zeros((len(words), 384), dtype=np.float32)
        chunk, start = [], 0
        def flush(chunk, start):
            if not chunk: return
            b = tok(chunk, is_split_into_words=True, return_tensors="pt", truncation=True, max_length=512)
            with torch.no_grad():
                h = enc(**b).last_hidden_state[0].numpy()
            seen = set()
            for k, wid in enumerate(b.word_ids()):
                if wid is not None and wid not in seen:
                    seen.add(wid); E[start + wid] = h[k]
        pos = 0
        for s in d.sentences:
            if chunk and len(chunk) + len(s) > 150:
                flush(chunk, start); chunk, start = [], pos
            chunk = chunk + s; pos += len(s)
        flush(chunk, start)
        rows = [(x, E[i], E[where], ok) for x, ok, i, where in instances(d, eng, p, positions=True)]
        docs_inst.append(rows)
    print("built", sum(map(len, docs_inst)), "instances in", round(time.time() - t0), "s")
    pickle.dump(docs_inst, open(cache, "wb"))

w0 = np.array(Weights().vector())
def acc(rows, score):
    return np.mean([r[3][int(np.argmax(score(r)))] for r in rows])

class Scorer(torch.nn.Module):
    def __init__(self, F, rank, use_ctx, use_cos):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(w0, dtype=torch.float32))
        self.use_ctx, self.use_cos = use_ctx, use_cos
        self.P = torch.nn.Linear(384, rank, bias=False); self.Q = torch.nn.Linear(384, rank, bias=False)
        torch.nn.init.normal_(self.P.weight, std=0.01); torch.nn.init.normal_(self.Q.weight, std=0.01)
        self.c = torch.nn.Parameter(torch.zeros(1))
    def forward(self, x, ep, em):  # x (C,F), ep (384,), em (C,384)
        s = x @ self.w
        if self.use_ctx:
            s = s + (self.P(em) * self.Q(ep)[None]).sum(-1)
        if self.use_cos:
            s = s + self.c * torch.nn.functional.cosine_similarity(em, ep[None], dim=-1)
        return s

def train(rows, rank=16, use_ctx=True, use_cos=False, epochs=30, l2=1e-3):
    m = Scorer(len(w0), rank, use_ctx, use_cos)
    opt = torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=0)
    T = [(torch.tensor(x, dtype=torch.float32), torch.tensor(ep), torch.tensor(em), torch.tensor(ok)) for x, ep, em, ok in rows]
    g = torch.Generator().manual_seed(13)
    for ep_ in range(epochs):
        for k in torch.randperm(len(T), generator=g).split(64):
            loss = 0
            for j in k.tolist():
                x, ep, em, ok = T[j]
                lp = torch.log_softmax(m(x, ep, em), 0)
                loss = loss - torch.logsumexp(lp[ok], 0)
            loss = loss / len(k) + l2 * (((m.w - torch.tensor(w0, dtype=torch.float32)) ** 2).sum() + (m.P.weight ** 2).sum() + (m.Q.weight ** 2).sum())
            opt.zero_grad(); loss.backward(); opt.step()
    return lambda r: m(torch.tensor(r[0], dtype=torch.float32), torch.tensor(r[1]), torch.tensor(r[2])).detach().numpy()

folds = doc_folds(len(docs_inst), 5)
res = {k: [] for k in ("rules", "linear", "cos", "bilinear8", "bilinear32")}
for held in folds:
    tr = [r for j in range(len(docs_inst)) if j not in held for r in docs_inst[j]]
    te = [r for j in held for r in docs_inst[j]]
    res["rules"].append(acc(te, lambda r: r[0] @ w0))
    res["linear"].append(acc(te, train(tr, use_ctx=False)))
    res["cos"].append(acc(te, train(tr, use_ctx=False, use_cos=True)))
    res["bilinear8"].append(acc(te, train(tr, rank=8)))
    res["bilinear32"].append(acc(te, train(tr, rank=32)))
    print({k: round(100 * v[-1], 2) for k, v in res.items()}, len(tr), len(te), flush=True)
print("mean", {k: f"{100*np.mean(v):.2f} ± {100*np.std(v, ddof=1):.2f}" for k, v in res.items()})
