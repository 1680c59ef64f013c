"""The memory network's answer to a Who question (`Asker`), as `whoqa.service` serves it on its network route.

Any book: one prepared with the workspace, or one added later (`whoqa.service.Service.intake`), whose vectors are
folded in. With adapt=True a book the model was not trained with is adapted first (its new embedding rows tuned on its
own artificial questions, see `whoqa.memnet.adapt`), once; later questions reuse it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from whoqa.core.store import load_who_set
from whoqa.core.book import is_done
from whoqa.core.device import resolve_device
from whoqa.core.numerics import intra_op_threads
from whoqa.core.query import Query
from whoqa.core.workspace import Workspace
from whoqa.memnet.adapt import book_rows, cached_adapt, patched
from whoqa.memnet.checkpoint import load_members, member_folders, saved_config
from whoqa.memnet.choose import choose_model
from whoqa.memnet.data import Example, MemoryCache, Vocab, book_arrays, collate, question_tokens
from whoqa.memnet.train import calibration_for
from whoqa.retrieval.bm25f import RetrievalConfig, context_sentences
from whoqa.retrieval.openbook import OpenBook, open_book


@dataclass
class NetworkAnswer:
    characters: list[tuple[str, float | None]]  # (name, calibrated probability or None if uncalibrated), best first
    evidence: list[tuple[float, str]]  # (attention, sentence), most attended first
    warnings: list[str] = field(default_factory=list)  # the answer stands, but the question may not fit the book
    adapted: bool = False  # the book's new vectors were tuned on its artificial questions
    calibration: dict | None = None  # {"temperature", "run", "ece", "by_book"}: where the probabilities' scale comes from
    character_ids: list[int] = field(default_factory=list)  # the book's ids of `characters`, in the same order
    evidence_sentences: list[int] = field(default_factory=list)  # the book's sentence ids of `evidence`


class Asker:
    """Loads the word vectors and a trained memory network once; then answers questions about any book."""

    def __init__(self, workspace: str | Path, model: str | None = None, adapt: bool = False, device: str = "auto",
                 fold=None):
        """model: a folder of WS/models/; by default the trained model whose cross-validated run has the best P@1
        (`self.choice` says which and why). device: auto | cpu | cuda[:N]. fold(ws, book_ids): the stage that folds
        books prepared without word vectors into them (data_prep.addbook.fold_books: the service passes it)."""
        self.fold = fold
        self.device = resolve_device(device)
        self.ws = Workspace(workspace)
        self.choice = choose_model(self.ws, model)
        self.model_dir = self.ws.models / self.choice.name
        self.model_name = self.choice.name
        self.adapt = adapt
        self._load()

    def _load(self) -> None:
        """(Re)load vectors and model: after a book is folded in, the model extends its matrix with the new rows."""
        self.vocab = Vocab(self.ws)
        self.members = load_members(self.model_dir, self.vocab, device=self.device)
        self.member_dirs = member_folders(self.model_dir)
        self.model = self.members[0]
        self.shared_embeddings = all(torch.equal(m.embed.weight, self.model.embed.weight) for m in self.members[1:])
        saved = saved_config(self.model_dir)
        config = saved.get("config", {})
        self.memories = config.get("memories", 100)
        self.threads = config.get("threads", 1)  # torch's intra-op threads, as the model was trained
        self.calibration = calibration_for(self.ws, self.model_name, config) if self.model_name != "pretrain" else None
        self.trained_books = saved.get("stats", {}).get("trained_books")
        self.rcfg = RetrievalConfig()
        self._books: dict[str, tuple] = {}

    def _book(self, book_id: str, ob: OpenBook | None = None):
        """The opened book (`ob`, when the caller has it) with its memory arrays."""
        if book_id not in self._books:
            if is_done(self.ws.books / book_id, book_id) and book_id not in self.vocab.books:
                if self.fold is None:
                    raise ValueError(f"book {book_id} has no word vectors (prepared with --no-embeddings): ask through "
                                     f"whoqa.service, which folds it in, or run `whoqa prepare --book {book_id}`")
                self.fold(self.ws, [book_id])  # prepared without vectors (e.g. --no-embeddings): fold it in now
                self._load()
            ob = ob or open_book(self.ws, book_id, self.rcfg)
            arrays = book_arrays(self.ws, book_id, self.vocab)
            patches = [None] * len(self.members)
            if self.adapt:
                for i, (m, d) in enumerate(zip(self.members, self.member_dirs)):
                    if len(book_rows(m, arrays)):
                        rows, vectors, _ = cached_adapt(m, d, self.ws, book_id, self.vocab, {book_id: arrays})
                        patches[i] = (rows, vectors)
            cache = None  # the book's sentences encoded once (members sharing their frozen embeddings, unadapted)
            if self.shared_embeddings and not any(patches) and len(arrays.candidates):
                cache = MemoryCache(self.model, {book_id: arrays})
            self._books[book_id] = (ob, arrays, patches, cache)
        return self._books[book_id]

    def ask(self, book_id: str, question: str | Query, top: int = 5, evidence: int = 3, ob: OpenBook | None = None,
            context: list[int] | None = None) -> NetworkAnswer:
        """The book's characters ranked for a Who question, with calibrated probabilities and the sentences attended
        to most. The caller may pass what it has already read: the opened book, and the question's BM25F context
        sentences (`OpenBook.windows`' recipe)."""
        with intra_op_threads(self.threads), torch.no_grad():
            return self._ask(book_id, question, top, evidence, ob, context)

    def trained_on(self, book_id: str) -> bool:
        """Whether the model trained on questions about the book (models saved before the record: the books with
        Who questions in the workspace; a --text book never has any)."""
        if self.trained_books is None:
            try:
                self.trained_books = sorted({q["document_id"] for q in load_who_set(self.ws)[1]})
            except FileNotFoundError:
                self.trained_books = []
        return book_id in self.trained_books

    def calibration_for_book(self, book_id: str) -> tuple[dict | None, str | None]:
        """(the calibration that holds for this book, or None; why not). A temperature measured on held-out questions
        of books the model trained on is far too sure on a new book (unseen ECE 0.533, docs/who-ranker.md), so a new
        book gets probabilities only from a book-level (`--by-book`) run."""
        cal = self.calibration
        if cal and not cal.get("by_book") and not self.trained_on(book_id):
            return None, (f"the model never trained on this book and its calibration (run {cal['run']}) was measured "
                          f"on books it trained on, so no probability is shown: `whoqa train --folds 10 --by-book` "
                          f"measures one for new books, and `ask --rerank` gives calibrated ones without training")
        return cal, None

    def _ask(self, book_id: str, question: str | Query, top: int, evidence: int, ob, context) -> NetworkAnswer:
        if not (question.text if isinstance(question, Query) else question).strip():
            raise ValueError("the question is empty: ask about the book, e.g. \"Who is the hero?\" or \"Where does "
                         "the story end?\"")
        ob, arrays, patches, cache = self._book(book_id, ob)
        book, query = ob.book, ob.query(question)
        if len(arrays.candidates) == 0:
            raise ValueError(f"book {book_id} has no characters to answer with (the engine found no person in it)")
        warnings = [f"the question names {n!r}, who is not a character of this book" for n in query.unknown]
        calibration, why = self.calibration_for_book(book_id)
        warnings += [why] if why else []
        if context is None:
            context = context_sentences(ob.windows(query, self.rcfg), len(book.sentences))
        ctx = context[:self.memories]  # (the stored contexts' recipe, cut where the model reads)
        ex = Example(book_id, self.vocab.ids(question_tokens(query, book_id)), ctx, [])
        b = collate([ex], {book_id: arrays}, self.memories)
        chars = b.cand_chars
        b = b.to(self.device)
        none = (torch.zeros(0, dtype=torch.long), torch.zeros(0, self.vocab.matrix.shape[1]))
        t = calibration["temperature"] if calibration else 1.0
        probs, atts = [], []
        shared = cache.batch([ex], self.memories) if cache is not None else None  # (the same for every member)
        for m, patch in zip(self.members, patches):
            with patched(m, *(patch or none)):
                scores, att = m(b.question, b.keys, b.values, b.candidates, return_attention=True,
                                memories=shared, salience=b.salience, roles=b.roles)  # (1, C), (1, hops, M)
            probs.append(torch.softmax(scores[0].cpu() / t, -1))  # (C,)
            atts.append(att[0].cpu())  # (hops, M)
        probs = torch.stack(probs).mean(0)  # (C,) the members' calibrated probabilities averaged
        att = torch.stack(atts).mean(0)  # (hops, M)
        order = probs.argsort(descending=True)[:top]
        names = [(book.characters[int(chars[0, i])].name, float(probs[i]) if calibration else None)
                 for i in order]
        weight = att.max(0).values[:len(ctx)]  # (M,) strongest attention over hops
        best = weight.argsort(descending=True)[:evidence]
        best = [int(i) for i in best if weight[i] > 0]
        ev = [(float(weight[i]), " ".join(book.sentence_words(ctx[i]))) for i in best]
        return NetworkAnswer(names, ev, warnings, any(p is not None for p in patches), calibration,
                      [int(chars[0, i]) for i in order], [int(ctx[i]) for i in best])
