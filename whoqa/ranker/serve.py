"""Ranking a book's characters for a question with a fitted feature ranker: the first stage over all characters,
then, where a local LLM is at hand, its name scores of the first stage's top k after the question's BM25F passages.
Calibrated probabilities either way: stage 1's softmax is itself a maximum-likelihood fit over all characters, and
stage 2 keeps the share p_in that the top k held in the fit's questions."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from whoqa.core.query import Query
from whoqa.core.seed import SEED
from whoqa.ranker.features import CONTEXT_SENTENCES, book_features, columns, first_written
from whoqa.ranker.model import FeatureRanker, log_softmax
from whoqa.llm.config import LLMConfig
from whoqa.reader.data import bm25f_passages
from whoqa.llm.prompt import ShotPool, first_shots, shares_start
from whoqa.retrieval.bm25f import Window, context_sentences
from whoqa.retrieval.openbook import OpenBook


@dataclass
class Ranking:
    """A book's characters for a question, best first."""
    ids: list[int]
    probabilities: list[float]  # calibrated, in the same order
    llm: list[float | None]  # the LLM's own share among the k names it read (None for those it did not read)
    read: bool  # whether the LLM read the passages (False: the first stage alone)


def served_shots(prompt: dict, pool: ShotPool, book_id: str, question: str) -> list:
    """A question's shots as the fit's re-ranking drew them (`FeatureRanker.llm_prompt`): per question from the
    workspace's pool, or the fixed ones, from the fit's own examples (the pool it was measured on) where given."""
    if prompt["shot_policy"] == "fixed" and prompt.get("examples"):
        return first_shots(prompt["examples"], book_id, prompt["shots"])
    return pool.shots(book_id, question, prompt["shots"], SEED, policy=prompt["shot_policy"])


def rank(ranker: FeatureRanker, ob: OpenBook, query: Query, wins: list[Window], reader=None,
         pool: ShotPool | list = (), network=None, written: list[int] | None = None,
         roles: tuple[dict, dict] | None = None) -> Ranking:
    """The book's characters ranked for the question (read in the opened book `ob`). `wins`: the question's BM25F
    windows (`OpenBook.windows`: its context, and the LLM's passages); `reader`: an LLMReader on the
    transformers runtime, or None for the first stage alone; `pool`: the questions the prompt's few shots are drawn
    from (whoqa.llm.prompt.who_pool: the question's own shots where it is one of them, as re-ranking drew);
    `network`: a `whoqa.memnet.slot_ask.SlotScorer`, required by a fit that uses the network feature; `written`: the
    characters the reader's written answer names (whoqa.ranker.written), for a fit that uses the written features
    or puts the written answer first (a `written_only` fit then asks the reader nothing); `roles`: the question's
    role matches where the caller has them (`book_features`)."""
    book = ob.book
    context = context_sentences(wins, CONTEXT_SENTENCES)
    scores = None
    if "network" in ranker.features["stage1"]:
        if network is None:
            raise FileNotFoundError("this feature ranker reads the slot network's scores: train it with `whoqa slots "
                                    "train --final`")
        scores = network.scores(book, query, context)
    ids, x = book_features(book, context, query.named, query, ranker.cast, scores,
                           tuple(ranker.features["stage1"]), written, roles)
    x = x[:, columns(ranker.features["stage1"])]  # (C, F): the fit's own features
    first_w = first_written(book, ids, written, ranker.cast)
    llm = None
    if reader is not None and not ranker.skips_llm(first_w):
        first = ranker.first(x)[:ranker.top_k]
        names = [book.characters[ids[j]].name for j in first]
        prompt = ranker.llm_prompt()  # (the reader's budget is prompt["prompt_tokens"]: Service.llm)
        shots = served_shots(prompt, ShotPool.of(pool), book.id, query.text)  # the shots re-ranking measured
        passages, starts = bm25f_passages(ob, query, prompt["passages"], True, wins)
        llm = reader.name_scores(query.text, passages, names, shots, starts, LLMConfig.order,
                                 shared_start=shares_start(prompt["shots"], prompt["shot_policy"]))  # (k,)
        share = dict(zip(first.tolist(), np.exp(log_softmax(np.array(llm)))))
    order, probs = ranker.probabilities(x, llm, first_w)
    return Ranking([ids[j] for j in order], [float(p) for p in probs],
                  [float(share[j]) if llm is not None and j in share else None for j in order], llm is not None)
