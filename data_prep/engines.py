"""The engine a workspace's books are made by: its identity (recorded beside each book: a book made otherwise is
redone), the workspace's record of it (WS/engine.json, through whoqa.core.store), and the engine made from a
config's names (data_prep.components' registries)."""
from __future__ import annotations

from pathlib import Path

from data_prep import components
from data_prep.config import PrepareConfig
from data_prep.narrativeqa import DataError, file_sha1
from whoqa.core.store import read_engine_record, write_engine_record


def engine_identity(cfg: PrepareConfig) -> dict:
    """What a prepared book was made by, recorded beside it (SOURCE_FILE): a book made otherwise is redone."""
    weights = None
    if cfg.coref_weights:
        if cfg.engine != "spacy":
            raise ValueError(f"--coref-weights is for the spacy engine's resolver, not {cfg.engine!r}")
        if not Path(cfg.coref_weights).is_file():
            raise DataError(f"coreference weights {cfg.coref_weights} not found: write them with `whoqa train-coref`")
        weights = file_sha1(Path(cfg.coref_weights))
    if cfg.resolver != components.DEFAULT_RESOLVER and cfg.engine != "spacy":
        raise ValueError(f"--resolver is the spacy engine's pronoun resolver; {cfg.engine!r} resolves its own")
    return {**components.identity(cfg.engine, cfg.resolver), "coref_weights": weights}


ENGINE_FIELDS = ("engine", "coref_weights", "booknlp_python", "booknlp_models", "resolver")


def record_engine(cfg: PrepareConfig, identity: dict) -> None:
    """Keep how this workspace's books are made (WS/engine.json), so a book added later (`ask --text`, an upload,
    `eval --data`) is made the same way."""
    rec = {**{f: getattr(cfg, f) for f in ENGINE_FIELDS}, "identity": identity}
    if rec["resolver"] == components.DEFAULT_RESOLVER:
        del rec["resolver"]  # (the record of a default workspace stays byte for byte as before the registry)
    if rec["coref_weights"]:
        rec["coref_weights"] = str(Path(rec["coref_weights"]).resolve())
    write_engine_record(cfg.workspace, rec)  # (when it differs: none yet, another, or a damaged one)


def recorded_engine(workspace: Path, parse_processes: int | None = None) -> tuple[object, dict | None]:
    """(engine, identity) as the workspace's `prepare` recorded them; the default spaCy engine and no identity for a
    workspace prepared before this was kept (or never prepared). A recorded weights file that is gone or changed is
    a one-line error: the book would be made otherwise than its workspace. `parse_processes` (None: the config's
    default) is not recorded: it changes how fast a book is made, never what is made."""
    how = {} if parse_processes is None else {"parse_processes": parse_processes}
    rec = read_engine_record(workspace)
    if rec is None:
        return make_engine(PrepareConfig(data="", workspace=str(workspace), **how)), None
    cfg = PrepareConfig(data="", workspace=str(workspace), **how,
                        **{f: rec.get(f) for f in ENGINE_FIELDS if rec.get(f)})
    identity = engine_identity(cfg)
    if rec.get("identity") and identity != rec["identity"]:
        raise DataError(f"{cfg.coref_weights} changed since this workspace's books were made with it: put the "
                        f"original back or run `whoqa prepare --coref-weights FILE` again")
    return make_engine(cfg), identity


def make_engine(cfg: PrepareConfig, parts: tuple | None = None):
    """The engine the config names (data_prep.components.ENGINES), with its resolver. `parts`: (engine entry,
    resolver entry) looked up by the parent process (`engine_parts`), so a worker process makes the engine of an
    entry registered at run time too (a plugin, a test's toy) without the registry being filled in it."""
    engine, resolver = parts or engine_parts(cfg)
    return engine.make(cfg, resolver)


def engine_parts(cfg: PrepareConfig) -> tuple:
    return components.engine(cfg.engine), components.resolver(cfg.resolver, for_prepare=True)
