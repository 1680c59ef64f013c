"""`whoqa prepare`'s configuration (PrepareConfig): what the engines, the workers and the stage itself are told."""
from __future__ import annotations

from dataclasses import dataclass, field

from data_prep.components import ENGINES, RESOLVERS
from whoqa.core.executor import EXECUTORS
from whoqa.core.jobs import default_jobs
from whoqa.core.registry import positive, require


@dataclass
class PrepareConfig:
    data: str
    workspace: str
    books: list[str] = field(default_factory=list)  # empty: every book of books/ (and books-unlabeled/ if unlabeled)
    engine: str = "spacy"  # a name of data_prep.components.ENGINES
    resolver: str = "rules"  # the spacy engine's pronoun resolver: a name of data_prep.components.RESOLVERS
    jobs: int = field(default_factory=default_jobs)  # books processed in parallel processes
    parse_processes: int = 0  # the spacy engine's parse of one book, across this many processes (0: auto, one per
    #                           core for a long book that no other book's process shares them with; the same result)
    unlabeled: bool = True  # also books-unlabeled/ (artificial questions and word vectors only)
    booknlp_python: str | None = None  # BookNLP engine: the Python of an environment with booknlp + transformers<=4.30
    booknlp_models: str | None = None  # BookNLP engine: folder of its model files (default ~/booknlp_models)
    max_books: int | None = None  # debug knob: only the first N books
    coref_weights: str | None = None  # spaCy engine: a `whoqa train-coref` weights file (None: the hand-set rules)
    who_set: bool = True  # build WS/who/ from qaps.csv once the books are done
    artificial: bool = True  # artificial Who questions per book under WS/artificial/
    embeddings: bool = True  # word2vec over all books' mention-replaced text under WS/embeddings/
    rebuild_vectors: bool = False  # train the vectors from scratch (else new books are folded in); stales models
    executor: str = "local"  # local (a process pool of `jobs`) | ray (a Ray cluster: whoqa.core.executor)
    ray_address: str | None = None  # with executor ray: auto, HOST:PORT (None: $RAY_ADDRESS, else auto)

    def __post_init__(self):
        ENGINES.check(self.engine)
        RESOLVERS.check(self.resolver)
        EXECUTORS.check(self.executor)
        positive(self, "jobs")
        require(self, "parse_processes", self.parse_processes >= 0, "0 (auto) or more")
        require(self, "max_books", self.max_books is None or self.max_books >= 0, "0 or more")
