from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_opens_with_the_commands_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    first_blocks = readme.split("```")[1:4:2]
    assert ci in first_blocks[1], "the README's test command must be the one .ci/run runs"
    assert "whoqa prepare --data ../shared/data" in first_blocks[0] and "bash install.sh" in first_blocks[0]
