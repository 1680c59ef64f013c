"""The route's scorer: what answers a question once it is routed, one function per route, in a registry
(`SCORERS`, by route name) the service looks up, as spaCy's components are found. Each takes the service (its
models, settings and books), the open book, the question read in it and the route, and gives the Answer:

    features  the feature ranker (+ the local LLM scoring its top names, + the names it writes): a Who answer
    network   the memory network trained on the book: a Who answer
    reader    the trained FiD reader: an other answer, grounded in the passages it read
    llm       the local LLM writing from the question's passages: an other answer, grounded

A new route is one function here and its name in the registry (and in the routing table's choices)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Callable, Protocol

from whoqa.core.query import Query
from whoqa.core.words import answer_tokens
from whoqa.llm.config import LLMConfig, model_name
from whoqa.llm.grounding import sentence_words_text
from whoqa.retrieval.bm25f import Window, context_sentences
from whoqa.retrieval.openbook import OpenBook
from whoqa.retrieval.passages import PassageConfig
from whoqa.service.evidence import evidence_for, grounded, who_reasons, written_evidence, written_reasons
from whoqa.service.models import Models
from whoqa.service.routing import Route, measured_rouge
from whoqa.service.schema import Answer, Evidence, Ranked, ServiceConfig, one_per_name


class Serving(Protocol):
    """What a scorer reads of the service (whoqa.service.answers.Service): its models, settings and passages."""
    models: Models
    cfg: ServiceConfig

    def passages(self, ob: OpenBook, query: Query, cfg: PassageConfig | None = None) -> list[Window]: ...


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
    from whoqa.ranker.features import CONTEXT_SENTENCES
    book, context, _ = who_context(ob, query)
    net = svc.models.network()
    got = net.ask(ob.id, query, svc.cfg.top, svc.cfg.evidence, ob, context)
    chars = [Ranked(i, n, p) for i, (n, p) in zip(got.character_ids, got.characters)]
    attention = [Evidence(s, text, [], w) for (w, text), s in zip(got.evidence, got.evidence_sentences)]
    if net.calibration is None:
        got.warnings.append("no cross-validated run of this model's recipe measured its calibration, so no "
                            "probability is shown: run `whoqa train --folds 10` with the same options")
    evidence = evidence_for(book, context[:CONTEXT_SENTENCES], chars, query, svc.cfg.evidence)
    return Answer(query.text, ob.id, "who", "network", "", f"memory network {net.model_name} "
                  f"({len(net.members)} member(s))", chars, evidence=evidence,
                  attention=attention, calibration=got.calibration, warnings=got.warnings,
                  why=["a model trained on questions about this workspace's books chose it"]
                  + who_reasons(book, context[:CONTEXT_SENTENCES], chars, query.named))


@scorer("features")
def features_answer(svc: Serving, ob: OpenBook, query: Query, route: Route) -> Answer:
    from whoqa.ranker.features import CONTEXT_SENTENCES
    from whoqa.ranker.serve import rank
    chooser = choosing_reader(svc)
    if chooser is not None:
        return choice_answer(svc, ob, query, *chooser)
    book, context, wins = who_context(ob, query)
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
    got = rank(fit.ranker, ob, query, wins, reader, svc.models.pool(who=True), svc.models.slots(fit),
               written.linked if written else None)
    chars = one_per_name([Ranked(i, book.characters[i].name, p, s)
                          for i, p, s in zip(got.ids, got.probabilities, got.llm)], svc.cfg.top)
    r = fit.ranker
    model = (f"feature ranker + {llm} ({reader.runtime}) reading the passages for its top {r.top_k}" if llm else
             "feature ranker, first stage (no local LLM)") + (
        f"; {model_name(writer)} writing the answer from the question's passages" if written is not None else "")
    calibration = {"by": "maximum likelihood on other books' questions", "fit": fit.where,
                   "fit_of": f"run {fit.measured_on}" if fit.measured_on else "the 41 shared books (shipped)",
                   "questions": r.questions, "ece": r.ece, "provenance": fit.provenance,
                   "stage": "both" if got.read else "first"}
    evidence = evidence_for(book, context[:CONTEXT_SENTENCES], chars, query, svc.cfg.evidence)
    why = who_reasons(book, context[:CONTEXT_SENTENCES], chars, query.named)
    if written is not None:
        evidence = written_evidence(book, written, chars, evidence, svc.cfg.evidence)
        why = written_reasons(book, written, chars) + why
    warnings = who_warnings(query)
    unmeasured = unmeasured_readers(r, llm if reader is not None else None, writer if written is not None else None)
    if unmeasured:  # the fit's probabilities hold for the readers it was fit with, no other
        chars = [Ranked(c.id, c.name, None, c.llm) for c in chars]
        calibration = None
        warnings.append(f"{' and '.join(unmeasured)} read here, not the reader this ranking was measured with, so "
                        f"no probability is shown (`whoqa measure-reader --llm {svc.models.routes().llm}` measures "
                        f"it)")
    return Answer(query.text, ob.id, "who", "features", "", model, chars, evidence=evidence,
                  calibration=calibration, warnings=warnings, why=why)


def unmeasured_readers(ranker, scoring: str | None, writer: str | None) -> list[str]:
    """The readers of this answer that the fit was not made with: the one scoring names (its prompt's llm) and the
    one writing the answer (its written_llm); a fit that names none (a workspace's own) is taken as made with
    them."""
    prompt = ranker.llm_prompt()
    made = {"scorer": prompt.get("llm"), "writer": prompt.get("written_llm")}
    return [model_name(used) for used, role in ((scoring, "scorer"), (writer, "writer"))
            if used is not None and made[role] not in (None, model_name(used))]


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
    base, cfg = svc.models.choosing_llm(llm)
    reader = svc.models.llm(base, scores=False, cfg=cfg)
    if not reader.backend.scores:
        svc.models.once(f"{model_name(llm)} runs through {reader.runtime} here, which gives no token likelihoods, so "
                        f"it cannot choose among the passages' people: Who answers come from the feature ranker "
                        f"(`bash install.sh` builds llama-cpp-python)")
        return None
    return fit, reader, cfg


def choice_answer(svc: Serving, ob: OpenBook, query: Query, fit, reader, cfg: LLMConfig) -> Answer:
    """A Who answer by the choice ranking (whoqa.ranker.reader_choice): the reader reads the passages once and scores every
    person they mention as the answer; one fitted logit weighs that choice with the counts (and the written answer,
    where the fit reads it). The evidence is the passage sentence naming the answer that shares most of the
    question's words."""
    import numpy as np
    from whoqa.ranker.model import softmax
    from whoqa.ranker.reader_choice import VOTED, choice_features, passage_votes, ranking_features, reader_choice
    from whoqa.ranker.features import CONTEXT_SENTENCES, SERVED, book_features, columns
    book, context, wins = who_context(ob, query)
    ids, x = book_features(book, context[:CONTEXT_SENTENCES], query.named, query, True, used=SERVED)
    x = x[:, columns(SERVED)]  # (C, 5)
    passages = PassageConfig(fusion=fit.passages) if fit.passages else None
    windows = svc.passages(ob, query, passages)
    choice = reader_choice(reader, ob, query, windows, svc.models.pool(who=False), cfg, fit.counted_first(ids, x))
    written = None
    if "written" in fit.features:
        written, _ = written_answer(svc, ob, query, passages, again=True)
    first_written = written.answer if written is not None else None
    votes = (passage_votes(reader, ob, query, windows, svc.models.pool(who=False), cfg)
             if set(VOTED) & set(fit.features) else None)
    order, probs = fit.probabilities(ranking_features(fit, x, list(SERVED),
                                                      choice_features(ids, choice, first_written, votes)))
    share = dict(zip(choice.candidates, softmax(np.array(choice.best())).tolist())) if choice.candidates else {}
    chars = one_per_name([Ranked(ids[j], book.characters[ids[j]].name, float(p), share.get(ids[j]))
                          for j, p in zip(order, probs)], svc.cfg.top)
    read = list(dict.fromkeys(choice.sentences))
    evidence = evidence_for(book, read + [s for s in context[:CONTEXT_SENTENCES] if s not in set(read)], chars,
                            query, svc.cfg.evidence)
    measured_here = (fit.provenance or {}).get("by") == "measure-reader"
    calibration = {"by": "maximum likelihood on other books' questions",
                   "fit": "this workspace (whoqa measure-reader)" if measured_here else "shipped",
                   "fit_of": fit.source, "questions": fit.questions, "ece": fit.ece, "stage": "choice"}
    kept = sum(int(a) in set(read) for a, *_ in windows)
    model = (f"{fit.reader} ({reader.runtime}) choosing among the {len(choice.candidates) - len(choice.extra)} "
             f"people its {kept} passage{'s' * (kept != 1)} mention"
             + (f" and the counts' first {len(choice.extra)}" if choice.extra else "") + ", weighed with the counts")
    why = choice_reasons(book, choice, chars, written) + who_reasons(
        book, context[:CONTEXT_SENTENCES], [Ranked(c.id, c.name, c.probability) for c in chars], query.named)
    return Answer(query.text, ob.id, "who", "features", "", model, chars, evidence=evidence,
                  calibration=calibration, warnings=who_warnings(query), why=why)


def choice_reasons(book, choice, chars: list[Ranked], written) -> list[str]:
    """What the reader read and chose, in plain words."""
    if not chars:
        return []
    if not choice.candidates:
        return ["the passages closest to your question name nobody else, so the counts decide"]
    best = choice.best()
    pick = choice.candidates[max(range(len(best)), key=best.__getitem__)]
    name = book.characters[pick].name
    people = len(choice.candidates) - len(choice.extra)
    among = (f"the {people} {'person' if people == 1 else 'people'} the passages closest to your question mention"
             + (" and the book's most mentioned" if choice.extra else ""))
    out = [f"asked to choose among {among}, the language model that read those passages chose {name}"
           + (", whom they do not mention" if pick in choice.extra else "") + ("" if pick == chars[0].id else
                                                     f"; how often the book and those passages mention each person "
                                                     f"put {chars[0].name} first")]
    if written is not None and written.answer is not None and written.answer != pick:
        out.append(f"writing the answer itself, it named {book.characters[written.answer].name}")
    return out


@scorer("reader")
def reader_answer(svc: Serving, ob: OpenBook, query: Query, route: Route) -> Answer:
    reader = svc.models.fid(route.model)
    got = reader.ask(ob.id, query, ob)
    # what it read (the stored contexts' recipe it trained on); a reader of no passage: the book's best passages
    wins = ob.windows(query)[:len(got.passages)] if reader.passages else svc.passages(ob, query)[:LLMConfig.top_k]
    why = [f"a reader trained on other books' questions wrote it after reading the book's {len(got.passages)} "
           f"passage{'s' * (len(got.passages) != 1)} closest to your question"]
    return grounded(Answer(query.text, ob.id, "reader", "reader", "", f"FiD reader {reader.model_name}",
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


def second_look(svc: Serving, ob: OpenBook, query: Query, route: Route | None, first: Answer) -> Answer:
    """A second look before "not found": the book searched with the question and the answer no passage held (the
    reader often knows where to look when it did not read it: "He dies from a gunshot wound"), read once more; the new
    answer stands where a sentence of its passages holds it and that passage is about the question
    (`_about_the_question`), else the first (not found, with its passages)."""
    wins = svc.passages(ob, ob.query(f"{query.text} {first.withheld}"))
    again = read_answer(svc, ob, query, route, wins)
    if not again.found or not _about_the_question(ob, query, wins, again):
        return first
    again.why.insert(1, f"a first reading of the passages closest to your question gave {first.withheld!r}, which "
                        "they do not hold; this answer comes from reading the passages that match it")
    return again


def _about_the_question(ob: OpenBook, query: Query, wins: list, ans: Answer) -> bool:
    """Whether the passage an answer of the second look rests on is about the question: its window holds a content
    word of the question besides the names. Passages found with the answer's own words always hold the answer, so
    grounding alone lets "Chimene" through for "Where does this story take place?"; this does not."""
    if not ans.grounds:
        return False
    asked, s = set(answer_tokens(query.content)), ans.grounds[0].sentence
    return any(a <= s <= b and asked & set(answer_tokens(" ".join(sentence_words_text(ob.book, x)
                                                                   for x in range(int(a), int(b) + 1))))
               for a, b, *_ in wins[:len(ans.passages) or 1])


def read_answer(svc: Serving, ob: OpenBook, query: Query, route: Route | None = None,
                wins: list | None = None) -> Answer:
    """The installed LLM's answer from `wins` (default the question's passages), with the options of the LLM run the
    route measured (else LLMConfig's), grounded in what it read."""
    from whoqa.llm.reader import answer_from_book
    llm = svc.models.routes().llm
    if llm is None:
        raise FileNotFoundError("no local LLM installed: `bash install.sh` installs one")
    base, cfg = svc.models.answering_llm(llm, route.options if route else None)
    wins = wins if wins is not None else svc.passages(ob, query)
    reader, pool = svc.models.llm(base, scores=False, cfg=cfg), svc.models.pool(who=False)
    text, passages = answer_from_book(reader, ob, query, wins, pool, cfg)
    shown = ", ".join([f"{k} {v}" for k, v in sorted(asdict(cfg).items())
                       if getattr(LLMConfig, k) != v and k != "runtime"]
                      + [f"{min(cfg.shots, len(pool.rows))} example questions", reader.runtime]
                      + ([f"weights {model_name(base)}"] if base != llm else []))
    rouge = measured_rouge(llm)
    why = ([f"a small language model ({model_name(llm)}) wrote it after reading the book's {len(passages)} "
            f"passage{'s' * (len(passages) != 1)} closest to your question"]
           + ([f"treat it as a rough guess: on test questions its answers share about {rouge:.0f}% of "
               f"their wording with people's answers"] if rouge is not None else []))
    return grounded(Answer(query.text, ob.id, "reader", "llm", "", f"{llm} ({shown})", answer=text,
                           passages=passages, why=why), ob.book, wins[:len(passages)], text, svc.cfg.grounding,
                    query)


def written_answer(svc: Serving, ob: OpenBook, query: Query, passages: PassageConfig | None = None,
                   again: bool = False):
    """A Who question answered as the reader of other questions writes answers (from `passages`' windows; default
    the service's), linked to the book's cast (whoqa.ranker.written): (Written, the reader's Answer). `again`: where
    it wrote only the person the question names, it is asked once more (`write_again`)."""
    wins = svc.passages(ob, query, passages)
    written, ans = _write(svc, ob, query, wins)
    if again and written.answer is None and written.named_passed:
        return write_again(svc, ob, query, wins, (written, ans))
    return written, ans


def write_again(svc: Serving, ob: OpenBook, query: Query, wins: list, first: tuple):
    """The reader asked once more, told that the person the question names is not the answer ("Who is Krag to
    Maskull?" answered "Krag is to Maskull a friend" names only the question's own people): the question with "(The
    answer is not Krag or Maskull.)", over the same passages. `first`: the first (Written, Answer); the second
    stands where it links, else the first."""
    names = " or ".join(dict.fromkeys(ob.book.characters[r].name for r in first[0].named_passed))
    written, ans = _write(svc, ob, query, wins, ob.query(f"{query.text} (The answer is not {names}.)"))
    if written.answer is None:
        return first
    written.named_passed = list(dict.fromkeys(first[0].named_passed + written.named_passed))
    return written, ans


def _write(svc: Serving, ob: OpenBook, query: Query, wins: list, asked: Query | None = None):
    """The reader's answer to `asked` (default the question) from these windows, linked as an answer to `query`."""
    from whoqa.ranker.written import link
    ans = read_answer(svc, ob, asked or query, wins=wins)
    sentences = [s for a, b, *_ in wins[:len(ans.passages)] for s in range(int(a), int(b) + 1)]
    return link(ob.book, ob.aliases, query, ans.answer or ans.withheld, sentences), ans


def who_context(ob: OpenBook, query: Query) -> tuple:
    """(the book, the question's context sentences, its BM25F windows): what every Who route reads."""
    if not ob.book.characters:
        raise ValueError(f"book {ob.id} has no characters to answer with (the engine found no person in it)")
    wins = ob.windows(query)
    return ob.book, context_sentences(wins, len(ob.book.sentences)), wins


def who_warnings(query: Query) -> list[str]:
    return [f"the question names {n!r}, who is not a character of this book" for n in query.unknown]
