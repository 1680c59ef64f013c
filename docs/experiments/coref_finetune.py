"""Issue 32's second experiment (docs/pipeline.md): does a *fine-tuned* MiniLM encoder help the pronoun resolver
choose among its candidates, where frozen MiniLM vectors did not (coref_context.py)? Teacher-forced on the rules' own
decisions, as there: each he/she/him/her the engine scored with 2+ candidates whose gold entity is among them.

One pass per pronoun, as mention-ranking coreference models do: the words from the earliest candidate mention's
sentence to the end of the pronoun's sentence (the last MAX_WORDS at most) are encoded by the bundled
all-MiniLM-L6-v2, its upper layers fine-tuned (the lower FROZEN kept: CPU time); the pronoun's and each candidate's
nearest mention's first word piece give vectors p and m, and a linear head over [p * m, m] (zero at the start)
adds a score to the rules' hand-set one (the residual the text adds; a candidate whose mention is outside the window
gets none). A softmax over the pronoun's candidates, trained by the log-likelihood of its right ones. 5 folds by document (the resolver's folds); accuracy of the top
candidate on the held-out fold, against the rules' hand-set weights. Seeded; CPU.

    .venv/bin/python docs/experiments/coref_finetune.py ../shared/data/litbank/coref [windows.pkl] [epochs]
"""
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from data_prep.coref import Weights  # noqa: E402
from data_prep.engine_spacy import SpacyEngine  # noqa: E402
from data_prep.coref_learn import instances  # noqa: E402
from data_prep.litbank import doc_folds, load_litbank, parse_docs  # noqa: E402
from whoqa.core.minilm import bundled_minilm  # noqa: E402

SEED, MAX_WORDS, BATCH, FROZEN = 13, 150, 8, 3  # FROZEN: the encoder's lower layers kept as they are (CPU time)
torch.manual_seed(SEED)
torch.set_num_threads(2)
cache = Path(sys.argv[2] if len(sys.argv) > 2 else "coref_windows.pkl")
EPOCHS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
w0 = np.array(Weights().vector())


def window(words, sent_of, starts, i, mentions):
    """(words, the pronoun's position, each mention's position or -1): from the earliest mention's sentence to the
    end of the pronoun's sentence, the last MAX_WORDS words at most."""
    hi = starts[sent_of[i] + 1] if sent_of[i] + 1 < len(starts) else len(words)
    lo = max(starts[sent_of[min([i, *mentions])]], hi - MAX_WORDS)
    return words[lo:hi], i - lo, [j - lo if j >= lo else -1 for j in mentions]


if cache.is_file():
    docs_inst = pickle.load(open(cache, "rb"))
else:
    docs = load_litbank(Path(sys.argv[1]))
    eng = SpacyEngine()
    parsed = parse_docs(eng, docs, progress=False)
    docs_inst = []
    for d, p in zip(docs, parsed):
        words = [w for s in d.sentences for w in s]
        starts, sent_of = [], []
        for k, s in enumerate(d.sentences):
            starts.append(len(sent_of))
            sent_of += [k] * len(s)
        docs_inst.append([(x, *window(words, sent_of, starts, i, where), ok)
                          for x, ok, i, where in instances(d, eng, p, positions=True)])
    pickle.dump(docs_inst, open(cache, "wb"))
print("instances", sum(map(len, docs_inst)), flush=True)

from transformers import AutoModel, AutoTokenizer  # noqa: E402

tok = AutoTokenizer.from_pretrained(bundled_minilm())


class SpanScorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = AutoModel.from_pretrained(bundled_minilm())
        for part in [self.enc.embeddings, *self.enc.encoder.layer[:FROZEN]]:
            part.requires_grad_(False)
        d = self.enc.config.hidden_size
        self.head = torch.nn.Linear(2 * d, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, words, pron, mentions):  # -> (C,) the residual score of each candidate
        b = tok(words, is_split_into_words=True, return_tensors="pt", truncation=True, max_length=512)
        first = {}
        for k, w in enumerate(b.word_ids()):
            if w is not None:
                first.setdefault(w, k)
        h = self.enc(**b).last_hidden_state[0]  # (T, d)
        p = h[first.get(pron, 0)]  # (d,)
        at = [first.get(j, -1) if j >= 0 else -1 for j in mentions]
        m = torch.stack([h[k] if k >= 0 else torch.zeros_like(p) for k in at])  # (C, d)
        s = self.head(torch.cat([p[None] * m, m], -1)).squeeze(-1)  # (C,)
        return s * torch.tensor([k >= 0 for k in at], dtype=s.dtype)


def scores(model, rows):
    model.eval()
    with torch.no_grad():
        return [x @ w0 + model(w, i, ms).numpy() for x, w, i, ms, _ in rows]


def train(rows, epochs):
    torch.manual_seed(SEED)
    model = SpanScorer()
    opt = torch.optim.AdamW([{"params": [q for q in model.enc.parameters() if q.requires_grad], "lr": 2e-5},
                             {"params": model.head.parameters(), "lr": 1e-3}], weight_decay=0.01)
    g = torch.Generator().manual_seed(SEED)
    for _ in range(epochs):
        model.train()
        for k in torch.randperm(len(rows), generator=g).split(BATCH):
            loss = 0.0
            for x, words, i, ms, ok in (rows[j] for j in k.tolist()):
                lp = torch.log_softmax(torch.tensor(x @ w0, dtype=torch.float32) + model(words, i, ms), 0)
                loss = loss - torch.logsumexp(lp[torch.tensor(ok)], 0)
            opt.zero_grad()
            (loss / len(k)).backward()
            opt.step()
    return model


if EPOCHS == 0:  # only build the instances and time a training step
    rows = [r for d in docs_inst for r in d][:32]
    t = time.time()
    train(rows, 1)
    print(f"{(time.time() - t) / len(rows):.3f} s per pronoun trained", flush=True)
    sys.exit(0)
res = {"rules": [], "fine-tuned": []}
t0 = time.time()
for held in doc_folds(len(docs_inst), 5):
    tr = [r for j in range(len(docs_inst)) if j not in held for r in docs_inst[j]]
    te = [r for j in held for r in docs_inst[j]]
    model = train(tr, EPOCHS)
    res["rules"].append(np.mean([r[-1][int(np.argmax(r[0] @ w0))] for r in te]))
    res["fine-tuned"].append(np.mean([r[-1][int(np.argmax(s))] for r, s in zip(te, scores(model, te))]))
    print({k: round(100 * v[-1], 2) for k, v in res.items()}, len(tr), len(te), f"{time.time() - t0:.0f} s",
          flush=True)
print("mean ± sd over the 5 folds",
      {k: f"{100 * np.mean(v):.2f} ± {100 * np.std(v, ddof=1):.2f}" for k, v in res.items()})
