"""Asking a book a question that is not about a character: BM25F passages of the book, then the trained reader."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from whoqa.core.workspace import Workspace
from whoqa.reader.data import Batcher
from whoqa.reader.model import FiDReader, read_reader_record
from whoqa.reader.choose import choose_model
from whoqa.reader.config import ReaderConfig
from whoqa.reader.steps import decoder_start_id
from whoqa.core.query import Query
from whoqa.reader.data import ReaderExample, bm25f_passages
from whoqa.retrieval.openbook import OpenBook, open_book

SERVABLE = ("none", "bm25f")  # passages ask can make for a new question (BERT's need its trained ranker, oracle's the answer)


@dataclass
class ReaderAnswer:
    answer: str
    passages: list[str]  # what the reader read, best first


class ReaderAsker:
    def __init__(self, workspace: str | Path, model: str | None = None, top_k: int | None = None,
                 num_beams: int | None = None, device=None):
        """Serves the reader as it was trained, on device: its saved config gives the passages (none, or BM25F's: the
        other rankers cannot run per question at ask time), top-k, beams, n-gram blocking and answer length, unless
        top_k / num_beams are given."""
        self.ws = Workspace(workspace)
        self.choice = choose_model(self.ws, model, contexts=None if model else SERVABLE)
        path = self.ws.reader_models / self.choice.name / "final"
        self.model_name = self.choice.name
        self.reader = FiDReader.load(str(path), device)
        self.reader.model.eval()
        self.cfg = ReaderConfig.from_record((read_reader_record(path) or {}).get("config", {}))
        self.batcher = Batcher(self.reader.tokenizer, self.cfg.passage_tokens, self.cfg.answer_tokens,
                               strip_start=decoder_start_id(self.reader), question_passage=self.cfg.question_passage)
        self.top_k = self.cfg.top_k if top_k is None else top_k
        self.num_beams = self.cfg.num_beams if num_beams is None else num_beams
        self.passages = self.cfg.context != "none"
        self._books: dict = {}

    def _book(self, book_id: str):
        if book_id not in self._books:
            self._books[book_id] = open_book(self.ws, book_id)
        return self._books[book_id]

    def ask(self, book_id: str, question: str | Query, ob: OpenBook | None = None) -> ReaderAnswer:
        """The reader's answer (`ob`: the opened book, when the caller has it)."""
        import torch
        with torch.no_grad():
            return self._ask(book_id, question, ob)

    def _ask(self, book_id: str, question: str | Query, ob: OpenBook | None) -> ReaderAnswer:
        ob = ob or self._book(book_id)  # prepared (and indexed) or a clear error
        query = ob.query(question)
        passages = bm25f_passages(ob, query, self.top_k) if self.passages else []
        ex = ReaderExample(-1, book_id, query.text, [], passages)
        fused = self.reader.encode(*self.batcher.inputs([ex]))  # states (1, T, H)
        answer = self.reader.generate(fused, self.cfg.max_new_tokens, self.num_beams, self.cfg.no_repeat_ngram)[0]
        return ReaderAnswer(answer, passages)
