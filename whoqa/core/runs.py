"""What a run is: its name plus a hash of its whole config and of the artifacts it starts from (its identity).

"Already done" means the same identity. A run folder that holds another identity is moved to WS/runs-archive/
<name>@<identity>/ before the new run starts, so a changed config redoes the work and never mixes old and new results,
and the old results are kept. Every results file carries `provenance`: config, inputs, identity, code version.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from whoqa.core.artifacts import read_cache, read_record
from whoqa.core.files import atomic_write

log = logging.getLogger(__name__)
RUN_FILE = "run.json"  # a run folder's provenance (written by `claim`)
RUN_CONFIG = "config.json"  # the config it ran with
RUN_SUMMARY = "summary.json"  # what it measured, once finished
PACKAGES = ("torch", "transformers", "gensim", "pyserini", "spacy", "entmax", "numpy")


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def file_digest(path: Path) -> str | None:
    """Hash of a small artifact (a config or record file); None when it does not exist."""
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.is_file() else None


def files_digest(paths) -> str:
    """Hash of the contents of several files (named by their file name), e.g. every book's artificial questions."""
    h = hashlib.sha256()
    for p in sorted(Path(p) for p in paths):
        h.update(p.name.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:12]


@lru_cache(maxsize=1)
def code_version() -> dict:
    """The git commit of the code (with "+dirty" for uncommitted changes) and the main packages' versions."""
    from importlib.metadata import PackageNotFoundError, version
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=5).stdout.strip() or None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if commit and dirty:
            commit += "+dirty"
    except (OSError, subprocess.SubprocessError):
        commit = None
    packages = {}
    for p in PACKAGES:
        try:
            packages[p] = version(p)
        except PackageNotFoundError:
            packages[p] = None
    return {"git": commit, "packages": packages}


def provenance(config: dict, inputs: dict) -> dict:
    return {"identity": digest({"config": config, "inputs": inputs}), "config": config, "inputs": inputs,
            "code": code_version()}


def same_run(old: dict, prov: dict, upgrade=None) -> bool:
    """Whether a recorded provenance (or model config record with "identity", "config", "inputs") is the run `prov`;
    upgrade({"config", "inputs"}) reads an older record as today's code would record the same run (e.g. fields added
    since, at the value that does what the old code did)."""
    if old.get("identity") == prov["identity"]:
        return True
    return bool(upgrade and isinstance(old.get("config"), dict) and isinstance(old.get("inputs"), dict)
                and digest(upgrade({"config": old["config"], "inputs": old["inputs"]})) == prov["identity"])


def claim(run_dir: Path, prov: dict, archive: Path, upgrade=None) -> str | None:
    """Make run_dir the home of the run `prov`; returns why an earlier run was moved away (None if nothing was)."""
    run_dir = Path(run_dir)
    path = run_dir / RUN_FILE
    if run_dir.is_dir() and any(run_dir.iterdir()):
        old = read_cache(path, dict) or {}  # missing or damaged: an unknown run, moved aside below
        if same_run(old, prov, upgrade):
            if old.get("identity") != prov["identity"]:
                atomic_write(path, json.dumps(prov, indent=1))  # the same run, recorded as today's code records it
            return None
        changed = sorted(k for k in set(old.get("config", {})) | set(prov["config"])
                         if old.get("config", {}).get(k) != prov["config"].get(k))
        changed_inputs = sorted(k for k in set(old.get("inputs", {})) | set(prov["inputs"])
                                if old.get("inputs", {}).get(k) != prov["inputs"].get(k))
        dest = Path(archive) / f"{run_dir.name}@{old.get('identity', 'unknown')}"
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(run_dir), str(dest))
        why = (f"{run_dir.name}: redone, the earlier run differs in "
               + (", ".join(changed + [f"input {k}" for k in changed_inputs]) or "an unrecorded config")
               + f" (kept in {dest})")
        log.warning(why)
    else:
        why = None
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(prov, indent=1))
    return why


def read_run_file(run_dir: Path, name: str = RUN_SUMMARY, default=None):
    """One of a run folder's records (RUN_CONFIG, RUN_SUMMARY, RUN_FILE, or a fold's file): `default` when it is not
    there (yet), DamagedArtifact when it cannot be read. Every run kind (memory network, reader, LLM, re-ranking)
    keeps these names."""
    return read_record(Path(run_dir) / name, f"move {Path(run_dir)} aside (`whoqa check --repair`) and run it again",
                       default)


def rerank_name(model: str, top_k: int, candidates: str, variant: str = "") -> str:
    """An LLM re-ranking's folder inside its run: rerank@<model>+k<k>[+<candidates>][<passage variant>] (the
    network's candidates have no suffix; raw passages no variant: `whoqa.llm.render`)."""
    return f"rerank@{model}+k{top_k}" + ("" if candidates == "network" else f"+{candidates}") + variant


def reranks(run_dir: Path) -> list[Path]:
    """The LLM re-rankings of a run, WS/runs/<run>/rerank@<model>+k<k>[...]/ (`whoqa rerank`), with a summary."""
    return sorted(p.parent for p in Path(run_dir).glob("rerank@*/" + RUN_SUMMARY))


def runs_of_model(runs_dir: Path, model: str) -> list[Path]:
    """The cross-validated runs of one model (`RunName.model`: WS/runs/<model>[+by-book][+folds<N>][+seed<N>]/)."""
    runs_dir = Path(runs_dir)
    found = []
    for run in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        try:
            if run.is_dir() and RunName.parse(run.name).model == model:
                found.append(run)
        except ValueError:  # a folder whoqa did not make
            continue
    return found


def feature_fits(runs_dir: Path, model: str) -> list[Path]:
    """Every run's feature-ranker re-ranking with this LLM and raw passages (`rerank@<model>+k<k>+features/`, each
    with a summary): the fits `ask` may serve."""
    runs_dir = Path(runs_dir)
    return sorted(p.parent for p in runs_dir.glob(f"*/rerank@{model}+k*+features/{RUN_SUMMARY}")) \
        if runs_dir.is_dir() else []


@dataclass(frozen=True)
class RunName:
    """A Who run's folder under WS/runs/, built and read here only:
    <kind>[+<recipe part>...][[<context>]][+by-book][+folds<N>][+seed<N>], e.g. memnet+pretrain+salience[bm25f]+by-book,
    features+by-book+folds5. `model` is the part a `--final` model is named by (WS/models/<model>/)."""
    kind: str  # memnet | features
    recipe: tuple[str, ...] = ()  # memnet: pretrain, salience, roles, w2v-chars
    context: str | None = None  # the contexts it reads (bm25f | bert)
    by_book: bool = False  # judged on book folds
    folds: int | None = None  # book folds, where not the default
    seed: int | None = None  # the trials' seed, where not the default

    @property
    def model(self) -> str:
        return "+".join((self.kind, *self.recipe)) + (f"[{self.context}]" if self.context else "")

    def __str__(self) -> str:
        return (self.model + ("+by-book" if self.by_book else "") + (f"+folds{self.folds}" if self.folds else "")
                + (f"+seed{self.seed}" if self.seed is not None else ""))

    @classmethod
    def parse(cls, name: str) -> "RunName":
        """The parts of a run's name; ValueError for a name whoqa does not make."""
        m = _RUN.fullmatch(name)
        if not m:
            raise ValueError(f"{name!r} is not a run name whoqa makes (e.g. memnet+pretrain+salience[bm25f]+by-book)")
        parts = m["head"].split("+")
        return cls(parts[0], tuple(parts[1:]), m["context"], bool(m["by_book"]),
                   int(m["folds"]) if m["folds"] else None, int(m["seed"]) if m["seed"] else None)


_RUN = re.compile(r"(?P<head>[a-z0-9-]+(?:\+(?!by-book|folds\d|seed\d)[a-z0-9-]+)*)(?:\[(?P<context>[a-z0-9-]+)\])?"
                  r"(?P<by_book>\+by-book)?(?:\+folds(?P<folds>\d+))?(?:\+seed(?P<seed>\d+))?")
