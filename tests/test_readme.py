from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_opens_with_the_commands_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    first_blocks = readme.split("```")[1:4:2]
    assert ci in first_blocks[1], "the README's test command must be the one .ci/run runs"
    main = first_blocks[0].split("\n", 1)[1]
    assert main.startswith("bash install.sh") and "whoqa reproduce main" in main and "--check" in main
    from whoqa.evaluation.reproduce import commands, load
    steps = commands(load("main"), "../shared/data", "ws")
    doc = (ROOT / "docs" / "reproductions.md").read_text()  # the main job's commands, spelled out (the README's until
    shown = doc.split("## `main`", 1)[1].split("```bash", 2)[2].split("```")[0]  # issue 54)
    for args in steps:  # docs/reproductions.md shows exactly what `reproduce main` runs
        assert f"whoqa {' '.join(args[:2])}" in shown, args
    for stage in ("split", "prepare", "index", "pretrain", "train", "eval", "ask"):
        assert any(a[0] == stage for a in steps)


def test_readme_is_a_first_use_page():
    """At most 100 lines: the two set-up commands, then asking your own book (CLI, chat, Python, the page), a short
    summary of the results, links; depth and history live in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 100
    for shown in ("whoqa ask ", "whoqa chat ", "Service(", "whoqa serve", "--upto"):
        assert shown in readme, shown
    assert readme.index("pytest -q") < readme.index("whoqa ask ") < readme.index("## Results")


def _anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings ("## What `ask` serves" -> what-ask-serves)."""
    import re
    out = set()
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            h = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", h).replace(" ", "-"))
    return out


def test_readme_links_resolve():
    """Every link of the README and the docs (the measurements' notes too) to a markdown file names one that exists,
    and a heading it has: a section moved to another file leaves no link pointing nowhere."""
    import re
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "experiments").rglob("*.md"))]
    for doc in docs:
        for target, anchor in re.findall(r"\]\(([^)#\s]*\.md)(?:#([^)\s]+))?\)", doc.read_text()):
            path = doc.parent / target
            assert path.is_file(), f"{doc.relative_to(ROOT)} links to missing {target}"
            assert not anchor or anchor in _anchors(path), f"{doc.relative_to(ROOT)} links to {target}#{anchor}: no such heading"
