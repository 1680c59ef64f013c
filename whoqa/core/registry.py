"""Components chosen by name: a `Registry` (a dict, name -> entry, with the kind of thing it names) and `check_name`,
so that every registry refuses an unknown name the same way: one ValueError line naming the kind, the name given
and the choices ("unknown engine 'x': use one of spacy, booknlp"). Configs call them in `__post_init__`, with
`require` and `positive` for their ranges."""
from __future__ import annotations

from typing import Iterable


def check_name(kind: str, name, choices: Iterable[str], also: Iterable[str] = ()) -> str:
    """`name` if it is one of `choices` (or `also`, names accepted beside them, e.g. "auto"); else one ValueError."""
    choices, also = list(choices), list(also)
    if name in choices or name in also:
        return name
    raise ValueError(f"unknown {kind} {name!r}: use one of {', '.join(map(str, [*also, *choices]))}")


class Registry(dict):
    """Named components of one kind (name -> entry), in the order they were registered; a new one is one entry (a
    plugin or a test may add one at run time). `check(name)` and `entry(name)` refuse an unknown name in one line."""

    def __init__(self, kind: str, entries: dict | Iterable[str] = (), also: Iterable[str] = ()):
        super().__init__(entries if isinstance(entries, dict) else dict.fromkeys(entries))
        self.kind = kind
        self.also = tuple(also)  # names accepted beside the entries, listed first in the message (e.g. "auto")

    def check(self, name) -> str:
        return check_name(self.kind, name, self, self.also)

    def entry(self, name):
        return self[check_name(self.kind, name, self)]


def require(config, field: str, ok: bool, rule: str) -> None:
    """A config's range check, in its `__post_init__`: one ValueError line naming the field, the rule and the value."""
    if not ok:
        raise ValueError(f"{type(config).__name__}.{field} must be {rule}, not {getattr(config, field)!r}")


def positive(config, *fields: str) -> None:
    """Each field (a count, a rate) above 0 (None: not set, allowed)."""
    for f in fields:
        v = getattr(config, f)
        require(config, f, v is None or v > 0, "above 0")
