"""The route's scorer: what answers a question once it is routed, one function per route, in a registry
(`SCORERS`, by route name) the service looks up, as spaCy's components are found. Each takes the service (its
models, settings and books), the open book, the question read in it and the route, and gives the Answer:

    features  a Who answer about any book: the reader chooses among the passages' people, or the counts rank
              (whoqa.service.who)
    network   the memory network trained on the book: a Who answer
    reader    the trained FiD reader: an other answer, grounded in the passages it read
    llm       the local LLM writing from the question's passages: an other answer, grounded

A new route is one function here and its name in the registry (and in the routing table's choices)."""
from __future__ import annotations

from typing import Callable

from whoqa.core.query import Query
from whoqa.llm.config import LLMConfig
from whoqa.retrieval.openbook import OpenBook
from whoqa.service.reading import Serving, grounded, read_answer, second_look
from whoqa.service.routing import Route
from whoqa.service.schema import Answer
from whoqa.service.who import network_ranking, who_answer, who_passages, who_ranking

Scorer = Callable[[Serving, OpenBook, Query, Route], Answer]
SCORERS: dict[str, Scorer] = {}


def scorer(name: str):
    """Register a route's scorer under its route's name."""
    def register(fn: Scorer) -> Scorer:
        SCORERS[name] = fn
        return fn
    return register


@scorer("network")
def network_answer(svc: Serving, ob: OpenBook, query: Query, route: Route) -> Answer:
    who = who_passages(ob, query, roles=False)
    return who_answer(ob, query, who, network_ranking(svc, ob, query, who), svc.cfg)


@scorer("features")
def features_answer(svc: Serving, ob: OpenBook, query: Query, route: Route) -> Answer:
    """The question's passages, the cast ranked by the ranking that serves here (whoqa.service.who.who_ranking),
    the answer explained."""
    who = who_passages(ob, query)
    ranked = who_ranking(svc)(ob, query, who)
    return who_answer(ob, query, who, ranked, svc.cfg)


@scorer("reader")
def reader_answer(svc: Serving, ob: OpenBook, query: Query, route: Route) -> Answer:
    reader = svc.models.fid(route.model)
    got = reader.ask(ob.id, query, ob)
    # what it read (the stored contexts' recipe it trained on); a reader of no passage: the book's best passages
    wins = ob.windows(query)[:len(got.passages)] if reader.passages else svc.passages(ob, query)[:LLMConfig.top_k]
    why = [f"a reader trained on other books' questions wrote it after reading the book's {len(got.passages)} "
           f"passage{'s' * (len(got.passages) != 1)} closest to your question"]
    return grounded(Answer(query.text, ob.id, kind="reader", route="reader", model=f"FiD reader {reader.model_name}",
                           answer=got.answer, passages=got.passages, why=why),
                    ob.book, wins, got.answer, svc.cfg.grounding, query)


@scorer("llm")
def llm_answer(svc: Serving, ob: OpenBook, query: Query, route: Route | None = None) -> Answer:
    """The installed LLM's answer from the question's passages; where no passage holds it and GroundingConfig's
    second_look is on, read once more from the passages its answer finds (`second_look`)."""
    ans = read_answer(svc, ob, query, route)
    if not ans.found and ans.withheld and svc.cfg.grounding.second_look:
        return second_look(svc, ob, query, route, ans)
    return ans
