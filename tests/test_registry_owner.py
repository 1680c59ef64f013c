"""The registry (whoqa.llm.registry) is the one owner of reader facts: no other module of the code, nor install.sh,
names a registered reader, its file, its size or its checksums, so adding or changing a reader is one entry there."""
from pathlib import Path

from whoqa.llm.registry import LLMS, chooser, requantised_sha256, scorer

ROOT = Path(__file__).resolve().parents[1]


def test_no_code_outside_the_registry_names_a_readers_facts():
    facts = {f for m in LLMS for f in (m.name, m.file, m.sha256, str(m.size) if m.size else None, m.package,
                                       *(sha for _, sha in m.requantised)) if f}
    code = [p for p in (ROOT / "whoqa").rglob("*.py") if p.name != "registry.py"]
    code += list((ROOT / "data_prep").rglob("*.py")) + [ROOT / "cli.py", ROOT / "install.sh"]
    found = [(p.relative_to(ROOT), f) for p in code for f in facts if f in p.read_text()]
    assert not found, found


def test_the_registry_answers_what_the_code_asks_of_it():
    assert "scores names" in scorer().roles and "writes answers" in chooser().roles
    t, sha = scorer().requantised[0]
    assert requantised_sha256(scorer().file, t.lower()) == sha and requantised_sha256("none.gguf", t) is None
