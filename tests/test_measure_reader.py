"""`whoqa measure-reader`: a reader the shipped fits were not made with gets no probability until it is measured;
measured on readers' questions (its fit half fit on, its check half reported), its fit is written into the
workspace with its figures and time, and `ask` then serves that reader's Who answers with probabilities."""
from typer.testing import CliRunner

from tests.test_any_book import STORY as LIGHTHOUSE
from tests.test_first_use import CHAPTERS
from tests.test_reader_choice import STORY as KLONDIKE

QUESTIONS = [
    ("lighthouse", "Who rowed to the village for bread?", "Tom"),
    ("lighthouse", "Who lit the great lamp?", "Anna"),
    ("lighthouse", "Who was pulled out of the sea?", "Jacob"),
    ("klondike", "Who did Glenister love on the ship?", "Helen"),
    ("klondike", "Who hated Glenister?", "Stillman"),
    ("klondike", "Who laughed at McNamara?", "Dextry"),
    ("chapters", "Who mended the nets?", "Tom"),
    ("chapters", "Who promised to return with gifts?", "Jacob"),
]


def write_books(root):
    """(a folder of three short books, readers' questions about them, their split: two books fit, one check)."""
    books = root / "books"
    books.mkdir()
    for name, text in (("lighthouse", LIGHTHOUSE), ("klondike", KLONDIKE * 3), ("chapters", CHAPTERS)):
        (books / f"{name}.txt").write_text(text)
    (root / "q.tsv").write_text("".join(f"{b}\twho\t{q}\t{a}\t1\t{a}\n" for b, q, a in QUESTIONS))
    (root / "split.tsv").write_text("lighthouse\tfit\nklondike\tfit\nchapters\tcheck\n")
    return books, root / "q.tsv", root / "split.tsv"


def test_a_reader_is_measured_then_trusted(tmp_path, tiny_llm_path):
    from cli import app
    from whoqa.core.workspace import Workspace
    from whoqa.llm.config import model_name
    from whoqa.ranker.reader_choice import load_choice_fit, measured_fit_path
    from whoqa.service import Service, ServiceConfig
    books, questions, split = write_books(tmp_path)
    ws = tmp_path / "ws"
    svc = Service(ws, ServiceConfig(device="cpu", llm=tiny_llm_path))
    before = svc.answer(svc.resolve(books / "lighthouse.txt"), "Who rowed to the village for bread?")
    assert all(c.probability is None for c in before.characters)  # unmeasured: no probability, said so
    assert any("measure-reader" in w for w in before.warnings)
    r = CliRunner().invoke(app, ["measure-reader", "--llm", tiny_llm_path, "--workspace", str(ws), "--questions",
                                 str(questions), "--books", str(books), "--split", str(split)])
    assert r.exit_code == 0, r.output
    assert "check half P@1" in r.output
    fit = load_choice_fit(measured_fit_path(Workspace(ws), model_name(tiny_llm_path)))
    assert fit.reader == model_name(tiny_llm_path) and fit.questions == 6  # the fit half's Who questions
    assert fit.provenance["by"] == "measure-reader" and fit.provenance["seconds"] > 0
    assert fit.provenance["check_half"]["n"] == 2 and "fit_half" in fit.provenance
    after = Service(ws, ServiceConfig(device="cpu", llm=tiny_llm_path))
    ans = after.answer(after.resolve(books / "lighthouse.txt"), "Who rowed to the village for bread?")
    assert "choosing among" in ans.model and ans.calibration["fit"].startswith("this workspace")
    assert all(0 < c.probability <= 1 for c in ans.characters)  # measured: probabilities from its own fit
