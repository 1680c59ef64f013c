"""How many processes a stage uses by default: one per core (results never depend on it)."""
from __future__ import annotations

import os


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)
