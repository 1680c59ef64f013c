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


# The only files that parse JSON themselves: the primitives every reader goes through, the store (the artificial
# questions' reader: gzipped JSONL, its own damage rule), and a benchmark reading its own subprocess's output (not an
# artifact).
PARSES_JSON = {"whoqa/core/artifacts.py", "whoqa/core/store.py", "data_prep/bench.py",
               "whoqa/llm/server.py"}  # (and a server's HTTP replies, which are not artifacts)


def test_workspace_json_is_read_only_through_the_artifact_readers():
    found = set()
    for path in [ROOT / "cli.py", *(ROOT / "whoqa").rglob("*.py"), *(ROOT / "data_prep").rglob("*.py")]:
        if re.search(r"\bjson\.loads?\(", path.read_text()):
            found.add(str(path.relative_to(ROOT)))
    assert found == PARSES_JSON, f"raw json.load outside whoqa.core.artifacts: {sorted(found - PARSES_JSON)}"


def test_run_folders_are_named_and_listed_only_in_core_runs():
    """No building, glob or substring parsing of run names outside whoqa/core/runs.py (RunName, rerank_name,
    reranks, feature_fits)."""
    allowed = {"whoqa/core/runs.py"}
    pattern = re.compile(r"f\"rerank@|glob\(f?\"[^\"]*rerank@|\"\+by-book\" (not )?in|\.split\(\"\+\"\)")
    found = {str(p.relative_to(ROOT)) for p in [ROOT / "cli.py", *(ROOT / "whoqa").rglob("*.py"),
                                                 *(ROOT / "data_prep").rglob("*.py")]
             if pattern.search(p.read_text())}
    assert found <= allowed, sorted(found - allowed)
