"""Fitted feature rankers: where `whoqa rerank --candidates features` keeps them in a workspace, and the one whoqa
ships (fit on the 41 shared books, `shipped.json`, with its provenance). One reader and one writer: `save_fit`
writes a fit with its cross-validation summary, `served_fit` reads the one to serve, refusing a fit made with other
features (`FeatureRanker.check`)."""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from whoqa.core.artifacts import read_cache, read_json
from whoqa.core.files import atomic_write
from whoqa.core.runs import RUN_SUMMARY, RunName, feature_fits, rerank_name
from whoqa.core.workspace import Workspace
from whoqa.ranker.model import FeatureRanker

SHIPPED = Path(__file__).with_name("shipped.json")
SUMMARY = RUN_SUMMARY


def fit_dir(workspace: Path, run: str, model: str, top_k: int, candidates: str, variant: str = "") -> Path:
    """WS/runs/<run>/rerank@<model>+k<k>[+<candidates>][<passage variant>]/: one LLM re-ranking of a run (the
    network's candidates have no suffix; raw passages none: `whoqa.llm.render.variant`)."""
    return Workspace(workspace).runs / run / rerank_name(model, top_k, candidates, variant)


def save_fit(folder: Path, summary: dict, variant: str | None = None) -> None:
    """The re-ranking's summary (and fit): summary.json, the one served; a variant (another fold seed's
    measurement) as summary+<variant>.json beside it, never served."""
    name = SUMMARY if variant is None else f"summary+{variant}.json"
    atomic_write(Path(folder) / name, json.dumps(summary, indent=1))


def read_summary(folder: Path, name: str = SUMMARY) -> dict | None:
    """A re-ranking's saved summary (or a variant's, `summary+<variant>.json`), None when there is none or it is
    damaged (it is redone by `whoqa rerank`)."""
    return read_cache(Path(folder) / name, dict)


@dataclass
class ServedFit:
    ranker: FeatureRanker
    where: str  # the file it was read from
    provenance: dict  # how it was made and what its cross-validation measured
    measured_on: str | None = None  # the run whose questions its CV judged (None: the shipped fit's 41 books)


def saved_ranker(saved: dict, where: str) -> FeatureRanker:
    """A saved fit as a FeatureRanker, checked (`FeatureRanker.check`); one with fields this whoqa does not know (a
    newer whoqa's) is one line naming it, not a TypeError."""
    unknown = sorted(set(saved) - {f.name for f in fields(FeatureRanker)})
    if unknown:
        raise ValueError(f"{where} was made by another version of whoqa (fields {', '.join(unknown)}): fit it again "
                         f"with `whoqa rerank --candidates features`, or update whoqa")
    return FeatureRanker(**saved).check(where)


def shipped_fit() -> ServedFit:
    saved = read_json(SHIPPED, "reinstall whoqa (`pip install -e .`): the shipped fit is part of the package", dict)
    return ServedFit(saved_ranker(saved["ranker"], f"the shipped fit {SHIPPED}"), str(SHIPPED),
                     saved["provenance"])


def workspace_fits(workspace: Path, model: str) -> list[tuple[str, Path]]:
    """(run, folder) of the workspace's own feature-ranker fits with this LLM, book-level ones first."""
    found = [f for f in feature_fits(Workspace(workspace).runs, model) if _run(f.parent.name) is not None]
    found.sort(key=lambda f: (not _run(f.parent.name).by_book, f.name))
    return [(f.parent.name, f) for f in found]


def _run(name: str) -> RunName | None:
    try:
        return RunName.parse(name)
    except ValueError:  # a folder whoqa did not make
        return None


def served_fit(workspace: Path, model: str) -> ServedFit:
    """The fit to serve with this LLM: the workspace's own (`whoqa rerank --candidates features`; a book-level one
    first, then the best cross-validated P@1, e.g. k = 5 over k = 10), else the shipped one. A damaged summary is
    passed over; one made with other features is refused."""
    found = [(run, folder, s) for run, folder in workspace_fits(workspace, model)
             for s in [read_summary(folder)] if s is not None and "ranker" in s]
    if not found:
        return shipped_fit()
    run, folder, s = min(found, key=lambda f: (not _run(f[0]).by_book,
                                               -float((f[2].get("combined") or {}).get("p@1") or 0.0)))
    ranker = saved_ranker(s["ranker"], str(folder / SUMMARY))
    cv = {k: s["combined"][k] for k in ("p@1", "p@5", "mrr")} if "combined" in s else {}
    return ServedFit(ranker, str(folder / SUMMARY), {"command": f"whoqa rerank --candidates features"
                                                                f"{'' if s.get('by_book_folds') else ' ' + run}",
                                                     "cv": {**cv, "ece": s.get("ece")},
                                                     "book_frequency": s.get("book_frequency")}, run)

