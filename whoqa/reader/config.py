"""The reader's configs, each default declared once: prereading, answer lookup and QA training (the CLI reads its
option defaults from these dataclasses)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from whoqa.core.seed import SEED


@dataclass
class PrereadConfig:
    base: str | None = None  # Hugging Face seq2seq path, or a BERT-like encoder for bert2bert (default: bundled MiniLM)
    passages: int = 30000  # passages restored (steps = passages / batch_size; 3,000 taught no reading, see README)
    passage_words: int = 100  # words per sampled passage (cut to passage_tokens after tokenising)
    passage_tokens: int = 128
    mask_ratio: float = 0.15
    span_lambda: float = 3.0
    batch_size: int = 8
    lr: float = 1e-3  # the new cross-attention needs it: at 1e-4 the decoder learned a language model, not to copy
    train_encoder: bool = False
    bf16: bool = False  # bfloat16 autocast for training (~1.8x faster on CPUs with AVX512-BF16 or AMX)
    books: str = "unlabeled"  # unlabeled: books no question is asked about (never a held-out book); all: every book
    seed: int = SEED
    checkpoint_every: int = 100  # steps



@dataclass
class LookupConfig:
    questions: int = 16000  # artificial questions trained on (once each)
    passages: int = 4  # the answer's window + 3 distractor windows of the same book
    window: int = 5  # sentences per passage (as the rankers' windows); the source sentence is the third
    passage_tokens: int = 160  # "question [SEP] passage" tokens; questions whose answer would be cut off are skipped
    answer_tokens: int = 16
    batch_size: int = 8
    lr: float = 3e-4
    preread: bool = True  # start from WS/models/preread/ (else from base)
    base: str | None = None  # as PrereadConfig.base, when not starting from the prereading
    train_encoder: bool = False
    bf16: bool = False
    books: str = "unlabeled"  # unlabeled: books no question is asked about; all: every book with artificial questions
    heldout: int = 256  # questions of held-out books (never trained on) for held-out accuracy and input reliance
    rename: bool = True  # random names for the characters of each example, so answers must be copied (see below)
    spans: float = 0.0  # share of span questions (What/Where/When/Why, data_prep.span_questions) among the questions
    copy: bool = False  # train a copy pointer (whoqa.reader.pointer) with the reader -> WS/models/lookup+copy/
    seed: int = SEED
    checkpoint_every: int = 100  # steps



@dataclass
class ReaderConfig:
    context: str = "bm25f"  # none | bm25f | bert | oracle
    base: str | None = None  # as PrereadConfig.base; ignored with preread
    preread: bool = False  # start from WS/models/preread/
    lookup: bool = False  # start from WS/models/lookup/ (answer lookup on artificial questions, after prereading)
    copy: bool = False  # a copy pointer over the passages' tokens (with lookup: WS/models/lookup+copy/)
    question_passage: bool = False  # the question alone as one more passage, first (Batcher.question_passage)
    top_k: int = 10  # passages per question (Mou et al.: top 10)
    passage_tokens: int = 192  # "question [SEP] passage" tokens
    answer_tokens: int = 32
    folds: int = 2  # book-level folds (2 on a 2-core CPU: each fold trains on half the books)
    epochs: int = 3
    batch_size: int = 8
    lr: float = 3e-4  # AdamW, linear warm-up (5%) and decay; the decoder's cross-attention starts from scratch
    train_encoder: bool = False
    bf16: bool = False  # as PrereadConfig.bf16 (training only; answers are generated in float32)
    num_beams: int = 4
    max_new_tokens: int = 32
    no_repeat_ngram: int = 0  # > 0: answers never write an n-gram twice (a copy pointer can loop: "kragullullull")
    seed: int = SEED
    max_train_samples: int | None = None  # debug: train on the first N questions of a fold
    max_eval_samples: int | None = None  # debug: answer the first N questions of a fold
    extra: dict = field(default_factory=dict)  # free-form notes saved with the results

    @classmethod
    def from_record(cls, saved: dict) -> "ReaderConfig":
        """The config a saved record holds; fields added since it was saved take their defaults."""
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})


def run_name(cfg: ReaderConfig) -> str:
    return (f"fid[{cfg.context}]" + ("+preread" if cfg.preread else "") + ("+lookup" if cfg.lookup else "")
            + ("+copy" if cfg.copy else "") + ("+question" if cfg.question_passage else "")
            + ("+encoder" if cfg.train_encoder else ""))


def with_defaults(kind: str, record: dict | None) -> dict | None:
    """A pretraining config record ("preread" or "lookup") with fields added since it was saved at their defaults, so
    a new PrereadConfig/LookupConfig field never makes the runs started from an older record stale."""
    cls = {"preread": PrereadConfig, "lookup": LookupConfig}[kind]
    known = {f.name for f in fields(cls)}
    return asdict(cls(**record)) if isinstance(record, dict) and set(record) <= known else record

