"""Reproductions as data: the smoke reproduction runs and checks in CI; the reported tables (docs/results.md, the
README's until issue 54) match the files."""
import json
from pathlib import Path

from typer.testing import CliRunner

from cli import app
from whoqa.core.seed import HASH_SEED
from whoqa.evaluation.reproduce import FOLDER, available, check, load

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_reproduction_checks(shared_data, tmp_path):
    r = CliRunner().invoke(app, ["reproduce", "smoke", "--data", str(shared_data), "--workspace", str(tmp_path / "ws"),
                                 "--check"])
    assert r.exit_code == 0, r.output
    assert sum(l.startswith("ok   ") for l in r.output.splitlines()) == len(load("smoke")["expect"])
    assert "FAIL" not in r.output
    # book-level folds: a book's questions all sit in one fold, answered by models pretrained without that book
    ws = tmp_path / "ws"
    folds, questions = {}, {}
    for f in (ws / "runs" / "memnet+pretrain+salience[bm25f]+by-book").glob("fold*_trial*.json"):
        run = json.loads(f.read_text())
        books = {p["book"] for p in run["predictions"]}
        questions.update({p["question_id"]: (run["fold"], sorted(p["answers"])) for p in run["predictions"]})
        assert folds.setdefault(run["fold"], books) == books
        pretrained = json.loads((ws / "models" / run["pretrained"] / "config.json").read_text())
        assert sorted(pretrained["config"]["exclude"]) == sorted(books)
        assert pretrained["stats"]["books"] == 3 - len(books)  # pretrained on the other books' artificial questions
    assert len(folds) == 2 and not set.intersection(*folds.values())
    # the feature ranker without a network run draws the same questions into the same book folds
    from whoqa.ranker.train import book_fold_candidates
    own = {c["question_id"]: (c["fold"], sorted(c["answers"])) for c in book_fold_candidates(ws, 2)}
    assert own == questions


def test_coref_reproduction_checks(shared_data, tmp_path):
    """The engine against LitBank, rules and learned weights, in a `whoqa` process (its fixed string-hash seed)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "cli.py"), "reproduce", "coref", "--data", str(shared_data),
                        "--workspace", str(tmp_path / "ws"), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok  ") == len(load("coref")["expect"]) and "FAIL" not in r.stdout


def test_check_fails_on_a_changed_result(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(json.dumps({"p@1": 20.0, "text": {"rouge_l": 9.0},
                                                            "rows": {"llm@qwen2.5": {"rouge_l": 13.0}}}))
    spec = {"expect": [{"file": "results/x.json", "metric": "p@1", "value": 20.5, "tolerance": 1},
                       {"file": "results/x.json", "metric": "text.rouge_l", "value": 12.0, "tolerance": 1},
                       {"file": "results/missing.json", "metric": "p@1", "value": 1.0, "tolerance": 1},
                       {"file": "results/x.json", "metric": ["rows", "llm@qwen2.5", "rouge_l"], "value": 13.2,
                        "tolerance": 1},
                       {"file": "results/x.json", "metric": "rows.llm@qwen2.5.rouge_l", "value": 13.0,
                        "tolerance": 1}]}  # a dotted path cannot name a row with a dot: the list form can
    assert [r["ok"] for r in check(spec, tmp_path)] == [True, False, False, True, False]


def test_a_value_that_differs_by_cpu_vendor_is_checked_against_this_vendor_s(tmp_path):
    """MKL takes other paths on AMD than on Intel, and the trained network ranks otherwise: an entry's by_cpu names
    each measured vendor's value, and the check holds a machine to its own vendor's (an unmeasured vendor to the plain
    value, saying so)."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(json.dumps({"p@1": 28.25}))
    spec = {"expect": [{"file": "results/x.json", "metric": "p@1", "value": 30.97, "tolerance": 0.01,
                        "by_cpu": {"GenuineIntel": 30.97, "AuthenticAMD": 28.25}}]}
    amd, intel, arm = (check(spec, tmp_path, v)[0] for v in ("AuthenticAMD", "GenuineIntel", "arm"))
    assert (amd["ok"], amd["value"], amd["note"]) == (True, 28.25, "on AuthenticAMD")
    assert (intel["ok"], intel["value"]) == (False, 30.97)
    assert not arm["ok"] and "not on arm" in arm["note"]
    assert check(spec, tmp_path)[0]["value"] in (28.25, 30.97)  # this machine's vendor, read from the system


def test_every_reproduction_parses_and_the_results_show_main_s_numbers():
    assert {"smoke", "main"} <= set(available())
    for name in available():
        spec = load(name)
        assert spec["steps"] and all(isinstance(a, str) for s in spec["steps"] for a in s), name
        for e in spec["expect"]:
            assert {"file", "metric", "value", "tolerance"} <= set(e), name
    readme = (ROOT / "docs" / "results.md").read_text()
    for name in ("main", "who"):  # the reported tables are these files' expected values
        for e in load(name)["expect"]:
            if e["file"] == "results/ask.json":  # the ask example: its own test below
                continue
            for value in {e["value"], *e.get("by_cpu", {}).values()}:  # each CPU vendor's, where they differ
                shown = f"{value:.3f}" if e["metric"] in ("mrr", "ece") else f"{value:.2f}"
                assert shown in readme, f"docs/results.md lacks {name}'s {e['file']} {e['metric']} = {shown}"
    results = (ROOT / "docs" / "results.md").read_text()
    for e in load("reader")["expect"]:  # the full-task table of docs/results.md
        assert f"{e['value']:.2f}" in results, e["metric"]
    pipeline = (ROOT / "docs" / "pipeline.md").read_text()
    for e in load("coref")["expect"] + load("coref-peer")["expect"]:  # the coreference tables of docs/pipeline.md
        assert f"{e['value']:.1f}" in pipeline or f"{e['value']:.2f}" in pipeline, e
    assert (FOLDER / "main.json").is_file()


def test_a_failing_step_stops_the_reproduction(tmp_path):
    """The main job's first step on a data folder that does not exist: it stops there, says which step failed, and
    never goes on to prepare."""
    r = CliRunner().invoke(app, ["reproduce", "main", "--data", str(tmp_path / "nowhere"), "--workspace",
                                 str(tmp_path / "ws")])
    assert r.exit_code != 0
    assert "step 1 of reproduction main failed" in r.output and "[2/" not in r.output


def test_whoqa_runs_with_a_fixed_string_hash_seed(monkeypatch):
    """String hashing decides how BookNLP's name clustering iterates its sets: `whoqa` fixes it, re-executing itself
    once with PYTHONHASHSEED set, and runs in place when it is set."""
    import os
    import sys
    import cli
    seen = {}

    def execv(exe, args):
        seen.update(exe=exe, args=args, seed=os.environ.get("PYTHONHASHSEED"))
        raise SystemExit(0)
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.setattr(os, "execv", execv)
    monkeypatch.setattr(sys, "argv", ["/bin/whoqa", "eval", "--workspace", "ws"])
    try:
        cli.entry()
    except SystemExit:
        pass
    assert seen == {"exe": sys.executable, "args": [sys.executable, "/bin/whoqa", "eval", "--workspace", "ws"],
                    "seed": HASH_SEED}
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    monkeypatch.setattr(sys, "argv", ["/bin/whoqa", "--help"])
    seen.clear()
    try:
        cli.entry()
    except SystemExit:
        pass
    assert not seen  # set by the user: respected, no re-execution


def test_the_reported_ask_example_is_what_the_main_job_records():
    """The main job's `ask` example (docs/results.md; the README's until issue 54) shows the answer `whoqa reproduce
    main --check` expects (results/ask.json): the same top character, at the same calibrated probability."""
    readme = (ROOT / "docs" / "results.md").read_text()
    block = readme.split("$ whoqa ask --workspace ws --text")[1].split("```")[0]
    first = next(l for l in block.splitlines() if "%" in l[:8])
    expect = {e["metric"]: e["value"] for e in load("main")["expect"] if e["file"] == "results/ask.json"}
    assert first.split("%", 1)[1].split("(")[0].strip() == expect["characters.0.name"]
    assert f"{100 * expect['characters.0.probability']:.1f}%" in first
    assert f"({expect['route']}: " in block  # the route line, as ask prints it
    # the headline above it, in the README's example too, is what `ask` prints for that answer
    from whoqa.answer_view import headline
    from whoqa.service.schema import Ranked
    said = headline(Ranked(0, expect["characters.0.name"], expect["characters.0.probability"]))
    assert said in block, said
    assert said in (ROOT / "README.md").read_text(), f"the README's ask example should open with {said!r}"


def test_experiment_scripts_import_what_whoqa_has():
    """A reproduction names scripts under docs/experiments: each whoqa or data_prep name they import must still
    exist (a module moved in a refactor leaves the script failing only when someone reruns it, sessions later)."""
    import ast
    import importlib
    import importlib.util
    missing = []
    for path in sorted((ROOT / "docs" / "experiments").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("whoqa", "data_prep"):
                module = importlib.import_module(node.module)  # (a module gone: ModuleNotFoundError)
                missing += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                            if not hasattr(module, a.name)
                            and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in ("whoqa", "data_prep"):
                        importlib.import_module(a.name)
    assert not missing, missing


def test_a_step_a_signal_kills_runs_again_once(caplog):
    """Each step is a `whoqa` process: one a native crash kills (a negative exit code) runs again from the work it
    kept, with a counted warning; one that dies twice stops the reproduction, saying which signal."""
    import pytest
    from whoqa.evaluation.reproduce import run
    calls = []

    def crashes_once(args):
        calls.append(args)
        return -11 if len(calls) == 2 else 0
    out = run("smoke", "data", "ws", crashes_once, echo=lambda _: None)
    steps = len(load("smoke")["steps"])
    assert out["steps_run_again"] == 1 and len(calls) == steps + 1 and calls[1] == calls[2]
    assert "killed by signal 11" in caplog.text
    with pytest.raises(RuntimeError, match=r"step 1 of reproduction smoke failed \(killed by signal 11\)"):
        run("smoke", "data", "ws", lambda args: -11, echo=lambda _: None)
    with pytest.raises(RuntimeError, match=r"failed \(exit 2\)"):
        run("smoke", "data", "ws", lambda args: 2, echo=lambda _: None)
