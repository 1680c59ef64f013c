"""docs/architecture.md's table of artifacts names real functions: every writer and reader it lists exists."""
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_reader_and_writer_in_the_artifact_table_exists():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc.split("## Damaged state", 1)[1].split("\n## ", 1)[0]
    rows = [l for l in table.splitlines() if l.startswith("| `") and "---" not in l]
    assert len(rows) >= 15
    named = {n for l in rows for cell in l.split("|")[2:4] for n in re.findall(r"`((?:whoqa|data_prep)[\w.]+)`", cell)}
    assert named
    for dotted in sorted(named):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
                break
            except ModuleNotFoundError:
                continue
        for attr in parts[cut:]:
            assert hasattr(obj, attr), f"{dotted}: no {attr}"
            obj = getattr(obj, attr)
