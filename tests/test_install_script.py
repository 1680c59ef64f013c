"""install.sh's Python one-liners compile: a broken one fails silently there (its stderr is thrown away and its
failure read as "llama-cpp-python crashes here"), so the set-up would quietly drop a runtime."""
import re
from pathlib import Path

INSTALL = Path(__file__).resolve().parents[1] / "install.sh"


def test_every_python_one_liner_of_install_sh_compiles():
    snippets = re.findall(r'python -c "((?:[^"\\]|\\.)*)"', INSTALL.read_text())
    assert len(snippets) >= 5
    for code in snippets:
        compile(code.replace('\\"', '"'), "install.sh", "exec")
