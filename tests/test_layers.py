"""The package's layers point one way: core <- data_prep <- retrieval <- memnet | reader <- llm <- ranker <- service <-
answer_view <- evaluation <- web <- whoqa.cli <- cli.

Every import is read from the source (function-level ones included, since they hide cycles from Python) and checked:
a module imports only from its own layer or below, the two readers of questions (memnet, reader) never import each
other, and no chain of imports comes back to where it started.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = [("whoqa.core",), ("data_prep",), ("whoqa.retrieval",), ("whoqa.memnet", "whoqa.reader"), ("whoqa.llm",),
          ("whoqa.ranker",),
          ("whoqa.service",), ("whoqa.answer_view",), ("whoqa.evaluation",), ("whoqa.web",), ("whoqa.cli",), ("cli",)]


def layer(module: str) -> tuple[int, str] | None:
    for rank, packages in enumerate(LAYERS):
        for p in packages:
            if module == p or module.startswith(p + "."):
                return rank, p
    return None


def modules() -> dict[str, Path]:
    out = {"cli": ROOT / "cli.py"}
    for pkg in ("whoqa", "data_prep"):
        for f in (ROOT / pkg).rglob("*.py"):
            parts = f.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports anywhere in its file (from-imports of a submodule count as that module)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def test_every_module_has_a_layer():
    assert [m for m in modules() if layer(m) is None] in ([], ["whoqa"])


def test_imports_point_down():
    bad = []
    for m, targets in graph().items():
        if layer(m) is None:
            continue
        rank, pkg = layer(m)
        for t in targets:
            trank, tpkg = layer(t) or (-1, "")
            if trank > rank or (trank == rank and tpkg != pkg):
                bad.append(f"{m} -> {t}")
    assert not bad, "imports against the layers:\n" + "\n".join(sorted(bad))


def test_no_cycles():
    g, state, cycles = graph(), {}, []

    def visit(m, stack):
        state[m] = 1
        for t in sorted(g[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2
    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_check_sees_function_level_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from whoqa.evaluation.evaluate import evaluate\n")
    assert imports("whoqa.core.m", f, {"whoqa.evaluation.evaluate"}) == {"whoqa.evaluation.evaluate"}
