"""One path from a book and a question to the best answer whoqa has: `ask`, the web page, `bench` and `eval --data`
all call this.

    intake(text | data + id | id) -> book id     made by the engine and weights the workspace's `prepare` recorded
    answer(book, question, route) -> Answer      one JSON schema (Answer.to_json) for the CLI, the API and eval

The route is chosen in one place, the routing table (whoqa.service.routing: read once per Service, again when the workspace's
measurements change), from what the workspace measured:
- a Who question about a book the served memory network trained on: the network, when its cross-validated P@1 on
  those books beats the feature ranker's on the same questions (its own measurement there, or its book-level figure:
  nothing in it is fit to a book, so it holds for any book); else the feature ranker;
- a Who question about any other book: the feature ranker, with the local LLM reading the passages where one is
  installed (its first stage alone otherwise), calibrated either way;
- any other question: the reader `whoqa eval` chose for its question word (what / why / where ...) on the workspace's
  book folds (whoqa.reader.routes), where that reader can serve (an LLM run answers with the options it was measured
  with); else the trained FiD reader where its cross-validated ROUGE-L beats the best installed LLM's measured one;
  else that LLM (the best measured whose answer takes at most READ_SECONDS on 2 cores). A reader that reads no
  passage of the book (context none: the question alone) serves only the workspace's training books, the books like
  those its score was measured on; any other book gets a reader of its passages.
Every Who answer carries evidence: the context sentences that mention its top character (by name or a resolved
pronoun), those matching the question best first. Every other answer carries the passage sentences it rests on, the
words it shares with them marked (whoqa.llm.grounding); where no passage sentence holds it (support under the
measured threshold), the answer is withheld and whoqa says it did not find it in the book, showing the best passages.
The LLM reads passages retrieved for what the question asks (whoqa.retrieval.passages), not its function words. The
models load once per process and are shared by every caller (one lock: answers run one at a time on a 2-core
machine). The package: schema (settings, the Answer), intake (books, opened once as OpenBooks), models (every model,
in one cache), routing, answers (Service: the question read once as a Query, then route -> scorer -> Answer),
scorers (one per route, in a registry), evidence (why, and what an answer rests on).
"""
from __future__ import annotations

from whoqa.service.routing import (ANSWERABLE, READ_SECONDS, ROUTES, Route, RoutingTable,  # noqa: F401
                           check_route, choose_route, features_p1, installed_llm, network_for, training_books)
from whoqa.llm.models import llm_installed  # noqa: F401
from whoqa.service.answers import Service  # noqa: F401
from whoqa.service.evidence import sentence_marks, who_reasons  # noqa: F401
from whoqa.service.intake import KEEP_BOOKS  # noqa: F401
from whoqa.core.query import check_question  # noqa: F401
from whoqa.service.schema import Answer, Evidence, Ranked, ServiceConfig, check_request  # noqa: F401
from whoqa.service.scorers import SCORERS  # noqa: F401
