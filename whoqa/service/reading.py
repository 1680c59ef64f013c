"""The installed LLM reading a question's passages: its answer grounded in what it read (other questions), or, for a
Who question, that answer linked to the book's cast (the written Who answer, whoqa.ranker.written)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Protocol

from whoqa.core.query import Query
from whoqa.core.words import answer_tokens
from whoqa.llm.config import LLMConfig, model_name
from whoqa.llm.grounding import GroundingConfig, ground, sentence_words_text
from whoqa.retrieval.bm25f import Window, window_sentences
from whoqa.retrieval.openbook import OpenBook
from whoqa.retrieval.passages import PassageConfig
from whoqa.service.models import Models
from whoqa.service.routing import Route, measured_rouge
from whoqa.service.schema import Answer, Evidence, ServiceConfig


class Serving(Protocol):
    """What a scorer reads of the service (whoqa.service.answers.Service): its models, settings and passages."""
    models: Models
    cfg: ServiceConfig

    def passages(self, ob: OpenBook, query: Query, cfg: PassageConfig | None = None) -> list[Window]: ...


def read_answer(svc: Serving, ob: OpenBook, query: Query, route: Route | None = None,
                wins: list[Window] | None = None) -> Answer:
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
    return grounded(Answer(query.text, ob.id, kind="reader", route="llm", model=f"{llm} ({shown})", answer=text,
                           passages=passages, why=why), ob.book, wins[:len(passages)], text, svc.cfg.grounding,
                    query)


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


def _about_the_question(ob: OpenBook, query: Query, wins: list[Window], ans: Answer) -> bool:
    """Whether the passage an answer of the second look rests on is about the question: its window holds a content
    word of the question besides the names. Passages found with the answer's own words always hold the answer, so
    grounding alone lets "Chimene" through for "Where does this story take place?"; this does not."""
    if not ans.grounds:
        return False
    asked, s = set(answer_tokens(query.content)), ans.grounds[0].sentence
    return any(s in w.sentences and asked & set(answer_tokens(" ".join(sentence_words_text(ob.book, x)
                                                                        for x in w.sentences)))
               for w in wins[:len(ans.passages) or 1])


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


def write_again(svc: Serving, ob: OpenBook, query: Query, wins: list[Window], first: tuple):
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


def _write(svc: Serving, ob: OpenBook, query: Query, wins: list[Window], asked: Query | None = None):
    """The reader's answer to `asked` (default the question) from these windows, linked as an answer to `query`."""
    from whoqa.ranker.written import link
    ans = read_answer(svc, ob, asked or query, wins=wins)
    return link(ob.book, ob.aliases, query, ans.answer or ans.withheld,
                window_sentences(wins[:len(ans.passages)])), ans


def grounded(ans: Answer, book, wins: list[Window], text: str | None, cfg: GroundingConfig, query: Query) -> Answer:
    """The answer with the sentences it rests on; withheld (found False) where no passage sentence holds it."""
    best, grounds = ground(book, wins, text, cfg, query.asked)
    ans.support, ans.found = round(best, 3), bool(text) and best >= cfg.threshold
    ans.grounds = [Evidence(x.sentence, x.text, x.marks, support=round(x.support, 3)) for x in grounds]
    if not ans.found:
        ans.answer, ans.withheld = None, text
    return ans
