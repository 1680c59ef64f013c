"""A Who answer in three steps, whichever way it is ranked: the question's passages (`who_passages`: its BM25F
windows, their sentences and the question's role matches there), the book's cast ranked (`choice_ranking`: the
reader chooses among the passages' people; `counted_ranking`: the counts, with a small reader's name scores and
the written answer; `network_ranking`: the memory network trained on the book), then the answer explained
(`who_answer`: the evidence and the reasons), built once."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from whoqa.core.book import Book
from whoqa.core.query import Query
from whoqa.core.syntax import question_roles
from whoqa.llm.config import LLMConfig, model_name
from whoqa.ranker.cast import cast_of
from whoqa.ranker.features import CONTEXT_SENTENCES, SERVED, book_features, columns
from whoqa.retrieval.bm25f import Window, context_sentences
from whoqa.retrieval.openbook import OpenBook
from whoqa.retrieval.passages import PassageConfig
from whoqa.service.evidence import (evidence_for, who_reasons, who_warnings, written_lead, written_reasons)
from whoqa.service.reading import Serving, written_answer
from whoqa.service.schema import Answer, CastRanking, Evidence, Ranked, ServiceConfig, one_per_name


@dataclass
class WhoPassages:
    """What every Who ranking reads of a question: its BM25F windows (best first), their sentences in that order,
    and (where parsed) its role matches (whoqa.core.syntax.question_roles) per cast person."""
    book: Book
    windows: list[Window]
    sentences: list[int]
    roles: tuple[dict, dict] | None = None

    @property
    def context(self) -> list[int]:
        """The sentences the counts and the evidence read: the first CONTEXT_SENTENCES."""
        return self.sentences[:CONTEXT_SENTENCES]


def who_passages(ob: OpenBook, query: Query, roles: bool = True) -> WhoPassages:
    """The question's passages in the opened book; `roles`: the question parsed and its role matched in them (the
    counts' role features; the parse costs a first answer about 2.5 s). A book with no one to answer with: one line."""
    book = ob.book
    if not book.characters:
        raise ValueError(f"book {ob.id} has no characters to answer with (the engine found no person in it)")
    wins = ob.windows(query)
    sentences = context_sentences(wins, len(book.sentences))
    matched = question_roles(book, sentences[:CONTEXT_SENTENCES], query.frame, query.named,
                             cast_of(book).of) if roles else None
    return WhoPassages(book, wins, sentences, matched)


def who_answer(ob: OpenBook, query: Query, who: WhoPassages, ranked: CastRanking, cfg: ServiceConfig) -> Answer:
    """The Answer of a ranking: the evidence (the sentences it read first, then the context's; its lead sentence
    before them), its reasons then the counts', the question's warnings then its own."""
    read = set(ranked.read)
    evidence = evidence_for(who.book, ranked.read + [s for s in who.context if s not in read], ranked.characters,
                            query, cfg.evidence)
    if ranked.lead is not None:
        evidence = ([ranked.lead] + [e for e in evidence if e.sentence != ranked.lead.sentence])[:cfg.evidence]
    counted = (ranked.characters if ranked.says_reading else
               [Ranked(c.id, c.name, c.probability) for c in ranked.characters])
    return Answer(query.text, ob.id, kind="who", route=ranked.route, model=ranked.model,
                  characters=ranked.characters, evidence=evidence,
                  attention=ranked.attention, calibration=ranked.calibration,
                  warnings=list(dict.fromkeys(who_warnings(query) + ranked.warnings)),
                  why=ranked.why + who_reasons(who.book, who.context, counted, query.named))


Ranking = Callable[[OpenBook, Query, WhoPassages], CastRanking]


def who_ranking(svc: Serving) -> Ranking:
    """The ranking that serves Who questions on a new book here: the reader's choice where its fit serves
    (`choosing_reader`), else the counts with the reader's name scores."""
    chooser = choosing_reader(svc)
    if chooser is None:
        return functools.partial(counted_ranking, svc)
    return functools.partial(choice_ranking, svc, *chooser)


def choosing_reader(svc: Serving):
    """(the shipped choice ranking, the reader that chooses, its config) where that ranking serves: shipped, reading
    on (not `--quick`), and the reader that writes answers here is the one it was fit with, on a runtime that gives
    token likelihoods; else None: the feature ranker answers, and a reader other than the fit's is said once."""
    from whoqa.ranker.reader_choice import choice_fit_for
    llm = svc.models.routes().llm
    fit = choice_fit_for(svc.models.home, model_name(llm)) if llm is not None else None
    if fit is None or not svc.cfg.reading or llm is None:
        return None
    if model_name(llm) != fit.reader:
        svc.models.once(f"the Who ranking in which the reader chooses was fit with {fit.reader}'s choices; "
                        f"{model_name(llm)} reads here, so Who answers come from the feature ranker, with no "
                        f"probability until `whoqa measure-reader --llm {llm}` measures it")
        return None
    if fit.unserved():
        svc.models.once(f"the choice ranking {fit.source!r} weighs {', '.join(fit.unserved())}, which `ask` does "
                        f"not read: Who answers come from the feature ranker (fit it without them: `whoqa "
                        f"fit-choice --arm counts+choice`)")
        return None
    base, cfg = svc.models.choosing_llm(llm)
    reader = svc.models.llm(base, scores=False, cfg=cfg)
    if not reader.backend.scores:
        svc.models.once(f"{model_name(llm)} runs through {reader.runtime} here, which gives no token likelihoods, so "
                        f"it cannot choose among the passages' people: Who answers come from the feature ranker "
                        f"(`bash install.sh` builds llama-cpp-python)")
        return None
    return fit, reader, cfg


def choice_ranking(svc: Serving, fit, reader, cfg: LLMConfig, ob: OpenBook, query: Query,
                   who: WhoPassages) -> CastRanking:
    """The reader chooses (whoqa.ranker.reader_choice): it reads the question's passages once and scores every
    person they mention as the answer; the fit's one logit weighs that choice with the counts."""
    from whoqa.ranker.model import softmax
    from whoqa.ranker.reader_choice import choice_features, ranking_features, reader_choice
    windows = svc.passages(ob, query, PassageConfig(fusion=fit.passages) if fit.passages else None)
    choice = reader_choice(reader, ob, query, windows, svc.models.pool(who=False), cfg)
    ids, x = book_features(who.book, who.context, query.named, query, True, used=SERVED, roles=who.roles)
    order, probs = fit.probabilities(ranking_features(fit, x[:, columns(SERVED)], list(SERVED),
                                                      choice_features(ids, choice)))
    share = dict(zip(choice.candidates, softmax(np.array(choice.best())).tolist())) if choice.candidates else {}
    chars = one_per_name([Ranked(ids[j], who.book.characters[ids[j]].name, float(p), share.get(ids[j]))
                          for j, p in zip(order, probs)], svc.cfg.top)
    measured_here = (fit.provenance or {}).get("by") == "measure-reader"
    calibration = {"by": "maximum likelihood on other books' questions",
                   "fit": "this workspace (whoqa measure-reader)" if measured_here else "shipped",
                   "fit_of": fit.source, "questions": fit.questions, "ece": fit.ece, "stage": "choice"}
    read = list(dict.fromkeys(choice.sentences))
    kept = sum(w.first in set(read) for w in windows)
    model = (f"{fit.reader} ({reader.runtime}) choosing among the {len(choice.candidates)} people its {kept} "
             f"passage{'s' * (kept != 1)} mention, weighed with the counts")
    return CastRanking("features", model, chars, calibration, choice_reasons(who.book, choice, chars), read=read,
                       says_reading=False)


def choice_reasons(book, choice, chars: list[Ranked]) -> list[str]:
    """What the reader read and chose, in plain words."""
    if not chars:
        return []
    if not choice.candidates:
        return ["the passages closest to your question name nobody else, so the counts decide"]
    best = choice.best()
    pick = choice.candidates[max(range(len(best)), key=best.__getitem__)]
    people = len(choice.candidates)
    among = f"the {people} {'person' if people == 1 else 'people'} the passages closest to your question mention"
    return [f"asked to choose among {among}, the language model that read those passages chose "
            f"{book.characters[pick].name}" + ("" if pick == chars[0].id else
                                               f"; how often the book and those passages mention each person put "
                                               f"{chars[0].name} first")]


def counted_ranking(svc: Serving, ob: OpenBook, query: Query, who: WhoPassages) -> CastRanking:
    """The feature ranker (whoqa.ranker.serve): the counts over the cast, a small reader's name scores for their
    top k, and the answer the reader of other questions writes, linked to the cast, where the fit reads it."""
    from whoqa.ranker.serve import rank
    llm = svc.models.who_llm()
    fit = svc.models.fit(llm)
    reader = None
    if llm:
        base, cfg = svc.models.scoring_llm(llm, fit)
        reader = svc.models.llm(base, scores=True, cfg=cfg)
    written, writer = None, svc.models.routes().llm
    if fit.ranker.reads_written and svc.cfg.reading and writer is not None:  # (else counting alone)
        # linked to the cast, from the passages the fit's written answers were read from
        written, _ = written_answer(svc, ob, query, fit.ranker.written_passages(),
                                    again=bool((fit.ranker.prompt or {}).get("written_again")))
    got = rank(fit.ranker, ob, query, who.windows, reader, svc.models.pool(who=True), svc.models.slots(fit),
               written.linked if written else None, roles=who.roles)
    chars = one_per_name([Ranked(i, who.book.characters[i].name, p, s)
                          for i, p, s in zip(got.ids, got.probabilities, got.llm)], svc.cfg.top)
    r = fit.ranker
    model = (f"feature ranker + {llm} ({reader.runtime}) reading the passages for its top {r.top_k}" if llm else
             "feature ranker, first stage (no local LLM)") + (
        f"; {model_name(writer)} writing the answer from the question's passages" if written is not None else "")
    calibration = {"by": "maximum likelihood on other books' questions", "fit": fit.where,
                   "fit_of": f"run {fit.measured_on}" if fit.measured_on else "the 41 shared books (shipped)",
                   "questions": r.questions, "ece": r.ece, "provenance": fit.provenance,
                   "stage": "both" if got.read else "first"}
    warnings = []
    unmeasured = unmeasured_readers(r, llm if reader is not None else None, writer if written is not None else None)
    if unmeasured:  # the fit's probabilities hold for the readers it was fit with, no other
        chars = [Ranked(c.id, c.name, None, c.llm) for c in chars]
        calibration = None
        warnings.append(f"{' and '.join(dict.fromkeys(unmeasured))} read here, not the reader this ranking was "
                        f"measured with, so no probability is shown (`whoqa measure-reader --llm "
                        f"{svc.models.routes().llm}` measures it)")
    return CastRanking("features", model, chars, calibration,
                       written_reasons(who.book, written, chars) if written is not None else [],
                       lead=written_lead(who.book, written, chars) if written is not None else None,
                       warnings=warnings)


def unmeasured_readers(ranker, scoring: str | None, writer: str | None) -> list[str]:
    """The readers of this answer that the fit was not made with: the one scoring names (its prompt's llm) and the
    one writing the answer (its written_llm); a fit that names none (a workspace's own) is taken as made with
    them."""
    prompt = ranker.llm_prompt()
    made = {"scorer": prompt.get("llm"), "writer": prompt.get("written_llm")}
    return [model_name(used) for used, role in ((scoring, "scorer"), (writer, "writer"))
            if used is not None and made[role] not in (None, model_name(used))]


def network_ranking(svc: Serving, ob: OpenBook, query: Query, who: WhoPassages) -> CastRanking:
    """The memory network trained on the workspace's books (whoqa.memnet.ask), its attention kept."""
    net = svc.models.network()
    got = net.ask(ob.id, query, svc.cfg.top, svc.cfg.evidence, ob, who.sentences)
    chars = [Ranked(i, n, p) for i, (n, p) in zip(got.character_ids, got.characters)]
    attention = [Evidence(s, text, [], w) for (w, text), s in zip(got.evidence, got.evidence_sentences)]
    if net.calibration is None:
        got.warnings.append("no cross-validated run of this model's recipe measured its calibration, so no "
                            "probability is shown: run `whoqa train --folds 10` with the same options")
    return CastRanking("network", f"memory network {net.model_name} ({len(net.members)} member(s))", chars,
                       got.calibration, ["a model trained on questions about this workspace's books chose it"],
                       attention=attention, warnings=got.warnings)
