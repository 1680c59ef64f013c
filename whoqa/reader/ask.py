"""Asking a book a question that is not about a character: BM25F passages of the book, then the trained reader."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


PREFERENCE = ("fid[bm25f]+preread", "fid[bm25f]", "fid[bert]+preread", "fid[bert]", "fid[none]")


@dataclass
class ReaderAnswer:
    answer: str
    passages: list[str]  # what the reader read, best first


class ReaderAsker:
    def __init__(self, workspace: str | Path, model: str | None = None, top_k: int = 10, num_beams: int = 4):
        from whoqa.reader.data import Batcher
        from whoqa.reader.model import READER_FILE, FiDReader
        from whoqa.reader.train import strip_start
        self.ws = Path(workspace)
        root = self.ws / "models" / "reader"
        names = [model] if model else list(PREFERENCE)
        path = next((root / n / "final" for n in names if (root / n / "final" / READER_FILE).is_file()), None)
        if path is None:
            raise FileNotFoundError(f"no trained reader under {root} ({', '.join(names)}): run `whoqa train --reader "
                                    f"fid --final --workspace {self.ws}` first")
        self.model_name = path.parent.name
        self.reader = FiDReader.load(str(path))
        self.reader.model.eval()
        cfg = json.loads((path / READER_FILE).read_text()).get("config", {})
        self.batcher = Batcher(self.reader.tokenizer, strip_start=strip_start(self.reader),
                               question_passage=cfg.get("question_passage", False))
        self.top_k, self.num_beams = top_k, num_beams
        self.no_repeat_ngram = cfg.get("no_repeat_ngram", 0)
        self._books: dict = {}

    def _book(self, book_id: str):
        from whoqa.ask import open_book
        from whoqa.retrieval import RetrievalConfig
        if book_id not in self._books:
            self._books[book_id] = open_book(self.ws, book_id, RetrievalConfig())
        return self._books[book_id]

    def ask(self, book_id: str, question: str) -> ReaderAnswer:
        import torch
        with torch.no_grad():
            return self._ask(book_id, question)

    def _ask(self, book_id: str, question: str) -> ReaderAnswer:
        from whoqa.reader.data import ReaderExample, window_text
        from whoqa.retrieval import question_fields, windows
        book, aliases, index = self._book(book_id)
        ranked = index.search(*question_fields(question, aliases), 1000)
        wins = windows(ranked, 5 * self.top_k, len(book.sentences))[:self.top_k]
        passages = [window_text(book, a, b) for a, b, _ in wins]
        ex = ReaderExample(-1, book_id, question, [], passages)
        fused = self.reader.encode(*self.batcher.inputs([ex]))  # states (1, T, H)
        return ReaderAnswer(self.reader.generate(fused, 32, self.num_beams, self.no_repeat_ngram)[0], passages)
