"""Asking a book a Who question: `whoqa ask` and its Python twin `Asker`."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from whoqa.book import Book, is_done


@dataclass
class Answer:
    characters: list[tuple[str, float]]  # (name, probability), best first
    evidence: list[tuple[float, str]]  # (attention, sentence), most attended first


def open_book(workspace: Path, book_id: str, rcfg):
    """(Book, AliasIndex, BM25FIndex) of a prepared book; its index is built the first time."""
    from data_prep.who_set import AliasIndex
    from whoqa.retrieval import BM25FIndex
    folder = Path(workspace) / "books" / book_id
    if not is_done(folder, book_id):
        raise FileNotFoundError(f"book {book_id} is not prepared in {workspace}: run `whoqa prepare "
                                f"--workspace {workspace} --book {book_id}` first")
    book = Book.load(folder, book_id)
    index = Path(workspace) / "index" / "bm25f" / book_id
    BM25FIndex.ensure(book, index)
    return book, AliasIndex(book.characters), BM25FIndex(index, rcfg)


class Asker:
    """Loads the word vectors and a trained memory network once; then answers questions about prepared books."""

    def __init__(self, workspace: str | Path, model: str | None = None, ranker: str = "bm25f"):
        from whoqa.memdata import Vocab
        from whoqa.memnet import KVMemNet, MemNetConfig
        from whoqa.retrieval import RetrievalConfig
        self.ws = Path(workspace)
        models = self.ws / "models"
        candidates = [model] if model else [f"memnet+pretrain[{ranker}]", f"memnet[{ranker}]", "pretrain"]
        path = next((models / m / "model.pt" for m in candidates if (models / m / "model.pt").is_file()), None)
        if path is None:
            raise FileNotFoundError(f"no trained model under {models} ({', '.join(candidates)}): run "
                                    f"`whoqa train --final --workspace {self.ws}` (or `whoqa pretrain`) first")
        self.model_name = path.parent.name
        cfg = json.loads((path.parent / "config.json").read_text())["config"] if (path.parent / "config.json").is_file() else {}
        self.vocab = Vocab(self.ws)
        self.model = KVMemNet(self.vocab.matrix, MemNetConfig(hops=cfg.get("hops", 3)))
        self.model.load_state_dict(torch.load(path, map_location="cpu"))
        self.model.eval()
        self.memories = cfg.get("memories", 100)
        self.rcfg = RetrievalConfig(context_sentences=self.memories)
        self._books: dict[str, tuple] = {}

    def _book(self, book_id: str):
        from whoqa.memdata import book_arrays
        if book_id not in self._books:
            self._books[book_id] = (*open_book(self.ws, book_id, self.rcfg), book_arrays(self.ws, book_id, self.vocab))
        return self._books[book_id]

    @torch.no_grad()
    def ask(self, book_id: str, question: str, top: int = 5, evidence: int = 3) -> Answer:
        from whoqa.memdata import Example, collate, question_tokens
        from whoqa.retrieval import context_sentences, question_fields, windows
        book, aliases, index, arrays = self._book(book_id)
        if len(arrays.candidates) == 0:
            raise ValueError(f"book {book_id} has no characters to answer with")
        ranked = index.search(*question_fields(question, aliases), self.rcfg.pool)
        ctx = context_sentences(windows(ranked, self.memories, len(book.sentences)), self.memories)
        ex = Example(book_id, self.vocab.ids(question_tokens(question, book_id, aliases)), ctx, [])
        q, k, v, c, _, chars = collate([ex], {book_id: arrays}, self.memories)
        scores, att = self.model(q, k, v, c, return_attention=True)  # (1, C), (1, hops, M)
        probs = torch.softmax(scores[0], -1)
        order = probs.argsort(descending=True)[:top]
        names = [(book.characters[int(chars[0, i])].name, float(probs[i])) for i in order]
        weight = att[0].max(0).values[:len(ctx)]  # (M,) strongest attention over hops
        best = weight.argsort(descending=True)[:evidence]
        ev = [(float(weight[i]), " ".join(book.sentence_words(ctx[int(i)]))) for i in best if weight[i] > 0]
        return Answer(names, ev)
