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


def test_the_amx_test_of_install_sh_reads_what_gcc_lists_under_pipefail():
    """install.sh runs under `set -o pipefail`: a test that stops reading gcc's long list at its first match kills
    gcc with SIGPIPE and reads as "no AMX", so a machine that faults on AMX kept the build that dies (seen in CI)."""
    import shutil
    import subprocess
    import pytest
    if shutil.which("gcc") is None:
        pytest.skip("no gcc here")
    listing = subprocess.run(["gcc", "-march=native", "-Q", "--help=target"], capture_output=True, text=True).stdout
    listed = re.search(r"-mamx-tile\s+\[enabled\]", listing) is not None
    define = next(line for line in INSTALL.read_text().splitlines() if line.startswith("amx_listed()"))
    # (a race: gcc dies only when grep stops before gcc has written all; here that was one time in three)
    loop = f"set -euo pipefail\n{define}\nfor i in $(seq 20); do if amx_listed; then echo yes; else echo no; fi; done"
    run = subprocess.run(["bash", "-c", loop], capture_output=True, text=True)
    assert run.stdout.split() == ["yes" if listed else "no"] * 20
