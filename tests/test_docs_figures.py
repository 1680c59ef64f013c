"""The README's headline figures are docs/results.md's and the reproductions' (issue 65, "docs that describe what
is"): each decimal figure of the README's "Results" is stated the same way in results.md's "The headline figures", and
where a reproduction checks one (whoqa/evaluation/reproductions/*.json, an "expect" entry's "value"), the README's
figure is that value within its tolerance. Pure file reading: no model, no workspace."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPRODUCTIONS = ROOT / "whoqa" / "evaluation" / "reproductions"
# a decimal figure ("26.90", "0.038"), not part of a longer number, a version or a model's size ("1.5B")
FIGURE = re.compile(r"(?<![\w.])\d+\.\d+(?![\w]|\.\d)")

# The README figures a reproduction checks: (what, the README's words around the figure with (...) on it, the
# reproduction, its result file, its metric). A figure's words may wrap onto the next line (any whitespace matches).
CHECKED = [
    ("book frequency's P@1 on books never trained on", r"most-mentioned character: (\d+\.\d+)%",
     "new-books-features", "results/book_frequency.json", "p@1"),
    ("the memory network's averaged trials, Table 2's P@1", r"right first (\d+\.\d+)% of the time",
     "who", "results/ensemble:memnet+pretrain+salience[bm25f].json", "p@1"),
    ("the routed full task's ROUGE-L", r"\(ROUGE-L[^)]*\): (\d+\.\d+)",
     "reader-routes", "results/full_task.json",
     ["rows", "routed: features+by-book+rerank@qwen2.5-coder-0.5b+k5+features + fid[none]+lookup", "metrics",
      "rouge_l"]),
    ("the 1.5B's ROUGE-L over the answers it shows, unseen books", r"(\d+\.\d+) on the answers it shows",
     "other-unseen", "results/served-other:features+llm@unseen.json", "text_answered.rouge_l"),
    ("LitBank CoNLL F1", r"CoNLL F1 (\d+\.\d+)", "coref", "coref/rules.json", "conll_f1"),
]


def section(text: str, heading: str) -> str:
    """The text under a `## heading` up to the next `## ` heading."""
    assert f"\n{heading}\n" in text, f"no '{heading}' section"
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def readme_results() -> str:
    return section((ROOT / "README.md").read_text(), "## Results")


def results_headline() -> str:
    return section((ROOT / "docs" / "results.md").read_text(), "## The headline figures")


def stated(figure: str, text: str) -> bool:
    """`figure` written in `text` as the same number ("71.2" is not in "71.21", nor "1.20" in "11.20")."""
    return re.search(rf"(?<![\w.]){re.escape(figure)}(?![\w]|\.\d)", text) is not None


def expected(name: str, file: str, metric) -> dict:
    spec = json.loads((REPRODUCTIONS / f"{name}.json").read_text())
    found = [e for e in spec["expect"] if e["file"] == file and e["metric"] == metric]
    assert len(found) == 1, f"{name}.json expects no single {file} {metric}"
    return found[0]


def test_the_readme_results_have_figures_to_check():
    figures = FIGURE.findall(readme_results())
    assert len(figures) >= 10, figures
    assert "1.5" not in figures  # the model's size (1.5B) is no figure


def test_every_readme_figure_is_results_md_s():
    """Each decimal figure of the README's Results is in results.md's headline section, written the same way: a
    figure changed in one file and not the other fails here."""
    headline = results_headline()
    missing = [f for f in FIGURE.findall(readme_results()) if not stated(f, headline)]
    assert not missing, f"the README's Results state {missing}, which docs/results.md's headline figures do not"


def test_every_headline_figure_of_results_md_is_the_readme_s():
    """And the other way round: results.md's headline section states no figure in bold that the README lacks."""
    readme = readme_results()
    bold = [f for b in re.findall(r"\*\*([^*]+)\*\*", results_headline()) for f in FIGURE.findall(b)]
    assert bold, "results.md's headline figures mark none in bold"
    assert all(stated(f, readme) for f in bold), [f for f in bold if not stated(f, readme)]


@pytest.mark.parametrize("what, words, name, file, metric", CHECKED, ids=[c[0] for c in CHECKED])
def test_readme_figures_equal_the_reproductions_expected_values(what, words, name, file, metric):
    """A README figure a reproduction checks is its expected value within the reproduction's tolerance (and half a
    unit of the README's last digit, since the README may round: 71.2 for 71.21)."""
    text = readme_results()
    m = re.search(words.replace(" ", r"\s+"), text)
    assert m, f"the README's Results no longer state {what} as r'{words}': update this test with the README"
    shown = m.group(1)
    e = expected(name, file, metric)
    rounding = 0.5 * 10 ** -len(shown.split(".")[1])
    assert abs(float(shown) - e["value"]) <= e["tolerance"] + rounding + 1e-9, \
        f"README: {what} = {shown}; {name}.json expects {e['value']} ± {e['tolerance']}"
    assert stated(shown, results_headline()), f"docs/results.md's headline figures lack {what} = {shown}"


def test_the_who_headline_is_the_shipped_choice_rankings_own_measurement():
    """The README's and results.md's Who figures are the ones the shipped choice ranking records of itself
    (whoqa/ranker/reader_choice.json, written by `whoqa fit-choice`): a new fit changes them or fails here."""
    fit = json.loads((ROOT / "whoqa" / "ranker" / "reader_choice.json").read_text())["provenance"]
    check, cv = fit["check_half"], fit["book_level_cv"]
    figures = [f"{check['p@1']:.1f}", f"{check['p@5']:.1f}", f"{float(cv['p@1'].split()[0]):.2f}",
               f"{float(cv['ece'].split()[0]):.3f}"]
    for text in (readme_results(), results_headline()):
        missing = [f for f in figures if not stated(f, text)]
        assert not missing, f"reader_choice.json's {missing} are not stated"


def test_the_three_readers_check_half_cells_are_their_committed_rows():
    """The README's "What a bigger reader buys" table: each reader's check-half cells (Who P@1 / P@5, other answers
    right) are what its committed per-question rows give (docs/experiments/readers-three), and the 1.5B's unseen-book
    cells are the expected values of the main job (Who) and of other-unseen (other answers)."""
    import importlib.util
    folder = ROOT / "docs" / "experiments" / "readers-three"
    spec = importlib.util.spec_from_file_location("readers_three_table", folder / "table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    rows = {line.split("|")[1].strip(): line for line in readme_results().splitlines()
            if line.strip().startswith("| ") and ("SmolLM2" in line or "Qwen2.5" in line)}
    assert len(rows) == 3, rows
    for key, name in table.READERS.items():
        line = next(v for k, v in rows.items() if k.startswith(name))
        got = table.readers_half(folder / f"readers-{key}.jsonl.gz")
        check = line.split("|")[2]
        assert f"{got['p@1']:.1f} / {got['p@5']:.1f}, {got['right']:.1f}%" in check, (name, check, got)
    served = {m: expected("main", "results/served:features@unseen.json", m)["value"] for m in ("p@1",)}
    other = {m: expected("other-unseen", "results/served-other:features+llm@unseen.json", m)["value"]
             for m in ("text.rouge_l", "text_answered.rouge_l")}
    unseen = next(v for k, v in rows.items() if k.startswith("Qwen2.5-Coder-1.5B")).split("|")[3]
    assert (f"{served['p@1']:.1f}, {other['text.rouge_l']:.2f} / {other['text_answered.rouge_l']:.2f}"
            in unseen), unseen


BENCHMARKS = ROOT / "docs" / "benchmarks"


def test_the_speed_figures_are_the_benchmarks_files():
    """The README's speed sentence and docs/benchmarks.md's table state what the benchmark files recorded
    (docs/benchmarks/*.json, each written by the command the table names): a new measurement changes them or fails
    here."""
    term = json.loads((BENCHMARKS / "terminal.json").read_text())
    new = json.loads((BENCHMARKS / "new_book.json").read_text())
    serve = json.loads((BENCHMARKS / "serve.json").read_text())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{round(term['who']['answer_at_s'])} s to the first answer about a new" in readme
    assert f"{round(new['ask_s_p50'])} s for later Who answers" in readme
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    table = [l for l in page.splitlines() if l.startswith("| ") and "---" not in l][1:]
    cells = {l.split("|")[1].strip(): l.split("|")[2].strip() for l in table}

    def row(start):
        (cell,) = [v for k, v in cells.items() if k.startswith(start)]
        return cell
    assert row("a first Who answer from a terminal").startswith(f"{term['who']['answer_at_s']:.1f} s")
    assert row("a first other answer from a terminal") == f"{term['other']['answer_at_s']:.1f} s"
    assert row("the first Who answer in one process") == f"{new['time_to_first_answer_s']:.1f} s"
    assert row("later Who answers") == f"{new['ask_s_p50']:.1f} s / {new['ask_s_p95']:.1f} s"
    assert row("the page: from \"ready\"") == f"{serve['ready_to_first_answer_s_median']:.1f} s"
    assert row("the page: from the upload") == f"{serve['upload_to_first_answer_s_median']:.1f} s"
    assert serve["ready_to_first_answer_s_median"] == sorted(r["ready_to_first_answer_s"] for r in serve["runs"])[1]
