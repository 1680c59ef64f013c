"""The memory network's configs, each default declared once (the paper's, Angelidis et al. §4, unless said): the CLI
reads its option defaults from here. No torch import, so `whoqa --help` stays fast."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.artifacts import read_record
from whoqa.core.jobs import default_jobs
from whoqa.core.registry import positive, require
from whoqa.core.runs import RunName
from whoqa.core.workspace import Workspace
from whoqa.core.seed import SEED


@dataclass
class PretrainConfig:
    epochs: int = 1  # the paper's best
    fraction: float = 1.0  # share of the artificial questions used (Figure 5)
    lr: float = 1e-3
    batch_size: int = 64
    memories: int = 20  # the 20 sentences up to the source sentence
    hops: int = 3
    salience: bool = False  # learned salience features (model.SALIENCE): off here, artificial questions shortcut them
    salience_lr: float = 0.1
    roles: bool = False  # values weigh characters by their role in the sentence, as the question asks (not in the paper)
    seed: int = SEED
    device: str = "auto"  # auto | cpu | cuda[:N] (whoqa.core.device); not part of a run's identity
    threads: int = 1  # torch intra-op threads: results depend on them (whoqa.core.numerics), so they are fixed
    max_train_samples: int | None = None  # debug knob
    name: str = "pretrain"  # output folder under WS/models/
    exclude: list[str] | None = None  # books whose artificial questions are left out (book-level CV's held-out fold)

    def __post_init__(self):
        positive(self, "epochs", "lr", "batch_size", "memories", "hops", "salience_lr", "threads", "max_train_samples")
        require(self, "fraction", 0 < self.fraction <= 1, "above 0 and at most 1")


@dataclass
class TrainConfig:
    ranker: str = "bm25f"  # bm25f | bert
    folds: int = 10
    trials: int = 5
    epochs: int = 60
    lr: float = 1e-3
    decay: float = 0.9  # learning rate x0.9 ...
    decay_every: int = 2  # ... every 2 epochs
    batch_size: int = 32
    memories: int = 100  # context sentences (top 20 windows of 5)
    hops: int = 3
    salience: bool = True  # learned salience features in the output layer (model.SALIENCE; --no-salience: the paper)
    salience_lr: float = 0.1  # their own rate: a few scalars that must reach the logits' scale in ~400 steps (0.01
    # and 0.3 did worse, docs/who-ranker.md)
    roles: bool = False  # values weigh characters by their role in the sentence, as the question asks (not in the paper)
    seed: int = SEED
    device: str = "auto"  # auto | cpu | cuda[:N] (whoqa.core.device); not part of a run's identity
    threads: int = 1  # torch intra-op threads: results depend on them (whoqa.core.numerics), so they are fixed
    jobs: int = field(default_factory=default_jobs)  # processes running the folds' trials side by side (each run is
    # seeded by its fold and trial: the same files as one process)
    from_pretrained: bool = False
    pretrained: str = "pretrain"  # which WS/models/<folder> to start from
    char_vectors: str = "pretrained"  # from_pretrained: the characters' vectors as pretraining tuned them, or
    # "word2vec": as folded-in word2vec left them, for every book, as a new book's are (a representation that
    # transfers: trained and new books look alike; docs/who-ranker.md)
    by_book: bool = False  # folds over books, not questions: each question is answered by a model that never trained
    # on its book (nor, pretrained, on its book's artificial questions: pretraining is redone per fold without them)
    max_train_samples: int | None = None  # debug knob
    runs_dir: str | None = None  # where fold files go (default WS/runs/<name>)

    def __post_init__(self):
        positive(self, "trials", "epochs", "lr", "decay", "decay_every", "batch_size", "memories", "hops", "salience_lr",
                 "threads", "jobs", "max_train_samples")
        require(self, "folds", self.folds >= 2, "at least 2")
        if self.char_vectors not in ("pretrained", "word2vec"):
            raise ValueError(f"unknown --char-vectors {self.char_vectors!r}: use pretrained or word2vec")


@dataclass
class AdaptConfig:
    epochs: int = 10
    lr: float = 1e-2  # 10 x 1e-2: the one setting that beat folded-in vectors on P@5 and MRR on two vector trainings (docs/results.md)
    batch_size: int = 64
    memories: int = 20  # as pretraining: the 20 sentences up to the source sentence
    max_questions: int = 4000  # a book's artificial questions used (a seeded sample when it has more)
    seed: int = SEED

    def __post_init__(self):
        positive(self, "epochs", "lr", "batch_size", "memories", "max_questions")


# Fields added after runs were recorded, at the value that does what those runs did: a record without them is read
# with these, so a new field never makes earlier runs and models stale (and they are not redone).
ADDED = {"salience": False, "salience_lr": 0.1, "roles": False, "threads": 1}
ADDED_TRAIN = {"by_book": False, "char_vectors": "pretrained"}  # only in TrainConfig
ADDED_PRETRAIN = {"exclude": None}  # only in PretrainConfig (its records are the ones with a "fraction")


def effective(config: dict) -> dict:
    """The fields of a PretrainConfig/TrainConfig record that change what a run does (a run's identity): the
    salience learning rate only matters with salience on; the device and the jobs are where, not what."""
    return {k: v for k, v in config.items()
            if k not in ("device", "jobs") and not (k == "salience_lr" and not config.get("salience"))}


def upgrade(record: dict) -> dict:
    """A recorded run {"config", "inputs"} as today's code records it: ADDED fields filled in where missing, only the
    effective fields, the vectors known by their lineage alone (runs recorded their row count too, which folding in
    a book changes)."""
    inputs = dict(record["inputs"])
    if isinstance(inputs.get("vectors"), dict):
        inputs["vectors"] = {"lineage": inputs["vectors"].get("lineage")}
    added = {**ADDED, **(ADDED_PRETRAIN if "fraction" in record["config"] else ADDED_TRAIN)}
    return {"config": effective({**added, **record["config"]}), "inputs": inputs}


def model_name(cfg: TrainConfig) -> str:
    """What a run trains (the folder of its --final model under WS/models/): memnet+<recipe>[<ranker>]."""
    return run_identity(cfg).model


def run_identity(cfg: TrainConfig) -> RunName:
    """The run's name as its parts (whoqa.core.runs.RunName)."""
    parts = [p for p, on in (("pretrain", cfg.from_pretrained), ("salience", cfg.salience), ("roles", cfg.roles),
                             ("w2v-chars", cfg.from_pretrained and cfg.char_vectors == "word2vec")) if on]
    return RunName("memnet", tuple(parts), cfg.ranker, cfg.by_book, seed=cfg.seed if cfg.seed != SEED else None)


def run_name(cfg: TrainConfig) -> str:
    """A cross-validated run's folder under WS/runs/: the model's name, then how it was judged (by-book folds; a seed
    other than the default), so seeds and fold kinds sit side by side."""
    return str(run_identity(cfg))


def saved_config(folder: Path) -> dict:
    """A saved model's record (WS/models/<name>/config.json: config, stats, vectors, code; written by
    `memnet.checkpoint.save_model`); {} when there is none."""
    return read_record(Path(folder) / "config.json", f"retrain it (`whoqa train --final` or `whoqa pretrain`), or "
                       f"move {folder} aside with `whoqa check --repair`", {})


def stale_models(workspace: Path, lineage: str) -> list[str]:
    """Memory networks under WS/models/ trained on other word vectors than `lineage` (retrain them)."""
    models = Workspace(workspace).models
    return [p.parent.name for p in sorted(models.glob("*/model.pt"))
            if saved_config(p.parent).get("vectors", {}).get("lineage") != lineage]
