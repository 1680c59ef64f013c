"""The product describes what is: its docs (README.md and docs/*.md, top level) hold no issue numbers ("issue 63",
"issues 64, 66", also wrapped onto the next line, or in a path: "issue63/") and no session words ("the sixth session"),
and no product file names docs/experiments. docs/experiments/** is the
notebook and keeps its history. Pure file reading."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = [re.compile(r"\b[Ii]ssues?\s+\d+"), re.compile(r"\bissue\d+"),  # ("issue63/": a path)
             re.compile(r"\bsession\b", re.IGNORECASE)]


def product_docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def hits(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = []
    for pattern in FORBIDDEN:
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{path.relative_to(root)}:{line}: {m.group(0)!r}")
    return sorted(found, key=lambda h: (h.split(":")[0], int(h.split(":")[1])))


def test_the_product_docs_are_read():
    docs = product_docs()
    assert ROOT / "README.md" in docs and len(docs) >= 5
    assert not any("experiments" in d.relative_to(ROOT).parts for d in docs)


def test_no_issue_numbers_or_session_words_in_the_product_docs():
    found = [h for doc in product_docs() for h in hits(doc)]
    assert not found, "issue numbers or session words in the product docs:\n" + "\n".join(found)


def test_the_check_finds_them(tmp_path):
    """The patterns catch what they are for, a number wrapped onto the next line included, and spare the rest."""
    doc = tmp_path / "x.md"
    doc.write_text("ok (issue\n63) here\n## Issue 52, measured\nthe sixth Session\nissues 64, 66\n"
                   "an issue-51 anchor, chat_session(), sessions, in turn\n[x](experiments/issue63/README.md)\n")
    found = hits(doc, tmp_path)
    assert [h.split(":")[1] for h in found] == ["1", "3", "4", "5", "7"], found


def test_no_product_file_names_the_experiments():
    """whoqa/, data_prep/ and cli.py never name a path under docs/experiments: the product does not lean on the
    notebook (a fit's provenance names its data by file name and sha256)."""
    import subprocess
    files = subprocess.run(["git", "ls-files", "whoqa", "data_prep", "cli.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    assert files
    naming = [f for f in files if not f.endswith((".gz", ".png"))
              and "docs/experiments" in (ROOT / f).read_text(errors="replace")]
    assert not naming, f"{naming} name docs/experiments"
