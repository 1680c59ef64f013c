"""Which trained model serves a question: the one whose cross-validated run scored best on its own folds.

`ask` and the routed full task read the recorded results instead of a hard-coded preference list, and say which model
they chose and why. A final model counts a run's score only when it was trained with the same recipe (its config but
the fold and debug settings), so a score never vouches for a model it did not measure.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from whoqa.core.runs import RUN_CONFIG, RUN_SUMMARY, read_run_file


@dataclass
class Choice:
    name: str
    score: float | None  # the cross-validated score that chose it (None: no run measured any candidate)
    metric: str
    why: str  # one line for the output


def choose(candidates: list[str], scores: dict[str, float | None], metric: str, what: str,
           wanted: str | None = None) -> Choice:
    """The best-scoring candidate (ties: by name); without any score, the first candidate in the caller's order."""
    if wanted:
        if wanted not in candidates:
            raise ValueError(f"{what} {wanted!r} not found; have: {', '.join(sorted(candidates)) or 'none'}")
        return Choice(wanted, scores.get(wanted), metric, f"{what} {wanted} (as asked)")
    if not candidates:
        raise FileNotFoundError(f"no {what} yet")
    scored = {c: s for c, s in scores.items() if c in candidates and s is not None}
    if scored:
        best = max(sorted(scored), key=lambda c: scored[c])
        return Choice(best, scored[best], metric, f"{what} {best}: the best cross-validated {metric} "
                                                  f"({scored[best]:.2f}) of {len(scored)} measured")
    return Choice(candidates[0], None, metric, f"{what} {candidates[0]}: no cross-validated run measures any "
                                               f"of {', '.join(candidates)}")


def same_recipe(a: dict, b: dict, ignore: tuple[str, ...]) -> bool:
    keys = (set(a) | set(b)) - set(ignore)
    return all(a.get(k) == b.get(k) for k in keys)


def recorded_score(run: Path, key: str, config: dict | None = None, not_recipe: tuple[str, ...] = ()) -> float | None:
    """A finished run's score (`key` of its summary.json, dotted for nested values); None without a summary or, with
    `config`, when the run (its config.json) trained another recipe than `config`."""
    value = read_run_file(run, RUN_SUMMARY)
    if value is None:
        return None
    recipe = read_run_file(run, RUN_CONFIG) if config is not None else None
    if recipe is not None and not same_recipe(recipe, config, not_recipe):
        return None
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
