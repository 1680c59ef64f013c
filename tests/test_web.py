"""`whoqa serve`: the JSON API on a small trained workspace, and the page end to end in a real headless Chromium."""
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.conftest import DYING_DETECTIVE
from tests.test_any_book import STORY, trained  # noqa: F401  (the module's trained workspace fixture)

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from whoqa.web.app import ServeConfig, create_app  # noqa: E402


@pytest.fixture
def served(trained, tmp_path):  # noqa: F811
    _, ws = trained
    shutil.copytree(ws, tmp_path / "ws")
    return tmp_path / "ws"


def client(ws, headers=None, **kw) -> TestClient:
    """The API as the page calls it: at the served address, with the page's X-Whoqa header."""
    kw.setdefault("warm", False)  # (loading the models when the page starts: its own test)
    return TestClient(create_app(ServeConfig(workspace=str(ws), **kw)), raise_server_exceptions=False,
                      base_url="http://127.0.0.1:8000", headers={"X-Whoqa": "page"} if headers is None else headers)


def _wait(c: TestClient, job: dict, limit: float = 300) -> dict:
    t0 = time.time()
    while job["state"] in ("queued", "running") and time.time() - t0 < limit:
        time.sleep(0.5)
        job = c.get(f"/api/jobs/{job['id']}").json()
    return job


def test_books_cast_and_a_character_in_context(served):
    c = client(served)
    books = c.get("/api/books").json()
    assert [b["id"] for b in books] == [DYING_DETECTIVE] and books[0]["characters"] > 3 and books[0]["words"] > 5000
    cast = c.get(f"/api/books/{DYING_DETECTIVE}/characters").json()
    assert cast[0]["mentions"] >= cast[-1]["mentions"] and any("Holmes" in x["name"] for x in cast[:3])
    holmes = next(x for x in cast if "Holmes" in x["name"])
    assert len(holmes["per_tenth"]) == 10 and sum(holmes["per_tenth"]) > 0
    one = c.get(f"/api/books/{DYING_DETECTIVE}/characters/{holmes['id']}").json()
    assert one["contexts"] and all(any(s["char"] == holmes["id"] for s in x["segments"]) for x in one["contexts"])
    assert c.get("/openapi.json").json()["paths"].keys() >= {"/api/books", "/api/books/{book_id}/ask",
                                                             "/api/jobs/{job_id}"}


def test_a_who_question_is_answered_with_highlighted_evidence(served):
    """The network's route (forced: the workspace's own CV decides otherwise on 6 questions): calibrated
    probabilities, evidence sentences that mention the top answer, the attended sentences apart and labelled."""
    c = client(served, llm="none")
    r = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": "Who poisons Holmes with a box?",
                                                          "route": "network"})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["kind"] == "who" and a["route"] == "network" and len(a["characters"]) == 5
    assert a["calibration"]["temperature"] > 0
    probs = [x["probability"] for x in a["characters"]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0001
    ids = {x["id"] for x in c.get(f"/api/books/{DYING_DETECTIVE}/characters").json()}
    marked = [s["char"] for e in a["evidence"] for s in e["segments"] if s["char"] is not None]
    assert a["evidence"] and marked and set(marked) <= ids  # mentions highlighted, each linked to a character
    best = a["characters"][0]["id"]
    assert all(any(s["char"] == best for s in e["segments"]) for e in a["evidence"])  # evidence mentions the answer
    assert a["attention"] and all(e["attention"] is not None for e in a["attention"])
    text = "".join(s["text"] for s in a["evidence"][0]["segments"])
    assert len(text) > 10 and "  " not in text
    assert all(s["text"] == s["text"].strip() for e in a["evidence"] for s in e["segments"] if s["char"] is not None)
    assert "html" not in a  # the API's answer is `ask --json`'s; the page asks for it drawn too (whoqa.answer_view)
    page = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": "Who poisons Holmes with a box?",
                                                             "route": "network", "html": True}).json()
    best = a["characters"][0]
    assert f'href="#/book/{DYING_DETECTIVE}/char/{best["id"]}"' in page["html"] and 'id="evidence"' in page["html"]
    assert f'<mark class="m hit" data-char="{best["id"]}">' in page["html"] and 'id="route"' in page["html"]


def test_the_page_answers_by_the_route_ask_chooses(served, tiny_llm_path):
    """The page's answers are `whoqa ask`'s: the same route, reason and JSON (whoqa.service)."""
    from typer.testing import CliRunner
    from cli import app
    q = "Who poisons Holmes with a box?"
    a = client(served, llm=tiny_llm_path, device="cpu").post(f"/api/books/{DYING_DETECTIVE}/ask",
                                                             json={"question": q}).json()
    r = CliRunner().invoke(app, ["ask", "--workspace", str(served), "--book", DYING_DETECTIVE, q, "--llm",
                                 tiny_llm_path, "--device", "cpu", "--json"])
    assert r.exit_code == 0, r.output
    cli = json.loads(r.output[r.output.index("{"):])
    for doc in (a, cli):
        doc.pop("seconds")
        for e in doc["evidence"] + doc["attention"]:
            e.pop("segments", None)
    assert a == cli and a["route"] in ("network", "features") and a["reason"]


def test_bad_ids_and_requests_get_json_errors_and_nothing_outside_is_read(served, tmp_path):
    c = client(served, llm="none")
    for path, status in ((f"/api/books/{'0' * 40}", 404), ("/api/books/..%2F..%2Fetc", 400),
                         ("/api/books/ABC", 400), (f"/api/books/{DYING_DETECTIVE}/characters/99999", 404),
                         ("/api/jobs/nope", 400), (f"/api/jobs/{'a' * 32}", 404)):
        r = c.get(path)
        assert r.status_code in (status, 404) and "error" in r.json() and "Traceback" not in r.text, path
    for body, status, why in (({"question": "   "}, 400, "empty"), ({"nothing": 1}, 422, "question"),
                              ({"question": "Who is \ud800 here?"}, 400, "not valid text"),
                              ({"question": "Who is it?", "route": "fast"}, 400, "unknown route"),
                              ({"question": "What is in the box?", "route": "features"}, 400, "not a Who question")):
        r = c.post(f"/api/books/{DYING_DETECTIVE}/ask", content=json.dumps(body).encode(),
                   headers={"Content-Type": "application/json"})
        assert r.status_code == status and why in r.json()["error"], (body, r.text)


def test_only_the_page_can_change_the_workspace(served):
    """Cross-site requests (another Origin, Sec-Fetch-Site cross-site, or no X-Whoqa header: a plain form post) are
    refused with 403, as is any Host the server is not served as (DNS rebinding); the page's own requests pass."""
    c = client(served, headers={})
    upload = {"file": ("x.txt", STORY.encode(), "text/plain")}
    books = sorted(p.name for p in (served / "books").iterdir())
    for headers, why in (({"X-Whoqa": "page", "Origin": "https://evil.example"}, "evil.example"),
                         ({"X-Whoqa": "page", "Sec-Fetch-Site": "cross-site"}, "cross-site"),
                         ({"Origin": "http://127.0.0.1:8000"}, "X-Whoqa")):
        r = c.post("/api/books", files=upload, headers=headers)
        assert r.status_code == 403 and why in r.json()["error"], r.text
    assert sorted(p.name for p in (served / "books").iterdir()) == books and not (served / "jobs").exists()
    r = c.get("/api/books", headers={"Host": "evil.example:8000"})
    assert r.status_code == 403 and "evil.example" in r.json()["error"]
    assert c.get("/api/books", headers={"Host": "localhost:8000"}).status_code == 200
    proxied = client(served, allow_hosts=["books.example.org"])
    assert proxied.get("/api/books", headers={"Host": "books.example.org"}).status_code == 200
    ok = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": "What is in the box?"},
                headers={"X-Whoqa": "page", "Origin": "http://127.0.0.1:8000", "Sec-Fetch-Site": "same-origin"})
    assert ok.status_code != 403, ok.text


def test_damaged_page_caches_and_jobs_are_not_a_500(served):
    c = client(served)
    c.get("/api/books")
    summary = served / "books" / DYING_DETECTIVE / "summary.json"
    summary.write_text("")  # a damaged cache of the page: made again
    assert c.get("/api/books").status_code == 200 and json.loads(summary.read_text())["summary"]["words"] > 0
    (served / "jobs").mkdir(exist_ok=True)
    (served / "jobs" / f"{'b' * 32}.json").write_text("")
    r = c.get(f"/api/jobs/{'b' * 32}")
    assert r.status_code == 410 and "damaged" in r.json()["error"]


def test_uploads_are_checked_processed_in_the_background_and_reused(served, tmp_path, tiny_llm_path):
    """Uploads are checked as `ask --text` checks a file; a book with no person is refused and not kept; in a
    workspace with no trained network the uploaded book gets the feature ranker's calibrated answer."""
    import shutil as sh
    sh.rmtree(served / "models")
    sh.rmtree(served / "runs")
    c = client(served, max_upload_mb=0.05, llm=tiny_llm_path, device="cpu")
    before = sorted(p.name for p in (served / "books").iterdir())
    binary = np.random.default_rng(0).integers(0, 256, 20000, dtype=np.uint8).tobytes()
    for name, data, status, why in (("bin.txt", binary, 400, "binary"), ("empty.txt", b"", 400, "empty"),
                                    ("big.txt", b"word " * 20000, 413, "limit")):
        r = c.post("/api/books", files={"file": (name, data, "text/plain")})
        assert r.status_code == status and why in r.json()["error"] and name in r.json()["error"], r.text
    nobody = b"the rain fell on the hills. the wind blew all night. the river rose and the fields flooded.\n" * 5
    job = _wait(c, c.post("/api/books", files={"file": ("rain.txt", nobody, "text/plain")}).json())
    assert job["state"] == "failed" and "no person" in job["error"] and "rain.txt" in job["error"], job
    assert sorted(p.name for p in (served / "books").iterdir()) == before  # nothing half-made, no empty cast
    r = c.post("/api/books", files={"file": ("lighthouse.txt", STORY.encode(), "text/plain")})
    assert r.status_code == 202, r.text
    job = _wait(c, r.json())
    assert job["state"] == "done", job
    assert job["book"] in {b["id"] for b in c.get("/api/books").json()}
    a = c.post(f"/api/books/{job['book']}/ask", json={"question": "Who rowed to the village for bread?"}).json()
    assert a["route"] == "features" and "no memory network is trained" in a["reason"], a
    assert {"Tom", "Anna"} & {x["name"].split()[0] for x in a["characters"]}
    probs = [x["probability"] for x in a["characters"]]
    assert set(probs) == {None}  # a reader the shipped fit was not measured with (the tiny LLM): no probability
    assert any("not the reader this ranking was measured with" in w for w in a["warnings"])
    assert a["evidence"] and all(any(s["char"] == a["characters"][0]["id"] for s in e["segments"])
                                 for e in a["evidence"])
    again = c.post("/api/books", files={"file": ("copy.txt", STORY.encode(), "text/plain")}).json()
    assert again["state"] == "done" and again.get("reused") and again["book"] == job["book"]
    ro = client(served, read_only=True).post("/api/books", files={"file": ("x.txt", STORY.encode(), "text/plain")})
    assert ro.status_code == 403 and "read-only" in ro.json()["error"]


def test_concurrent_questions_give_the_same_answers(served):
    c = client(served, llm="none")
    q = {"question": "Who poisons Holmes with a box?"}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: c.post(f"/api/books/{DYING_DETECTIVE}/ask", json=q), range(16)))
    assert all(r.status_code == 200 for r in answers)
    assert len({json.dumps(r.json()["characters"]) for r in answers}) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _chromium_on_server(**serve):
    """A real uvicorn server of ServeConfig(**serve) on a free port and headless Chromium (Debian's, driven by
    Playwright): yields (port, browser, playwright's sync_api), both stopped after; skips where either is missing."""
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: the browser test "
                                                                 "is skipped")
    if not browser_path:
        pytest.skip("no Chromium on this machine (apt-get install chromium): the browser test is skipped")
    import uvicorn
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(ServeConfig(port=port, **serve)), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"])
            yield port, browser, sync_api
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_the_page_in_a_real_browser(served, tmp_path, tiny_llm_path):
    """Headless Chromium (Debian's, driven by Playwright) on a real uvicorn server over a workspace with no trained
    network: upload a short book, wait for it, open the cast and a character, ask a Who question and see the
    answer (no probability: the test reader is not the one the fit was measured with), the route that gave it and
    the evidence with its mentions highlighted; ask another question and see its answer with the sentences it rests
    on, or that it was not found. A page of another origin cannot upload."""
    shutil.rmtree(served / "models")
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    with _chromium_on_server(workspace=str(served), llm=tiny_llm_path, device="cpu") as (port, browser, sync_api):
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/#/add")
        page.set_input_files("#file", str(story))
        page.click("#upload button")
        page.wait_for_function("localStorage.getItem('whoqa-job') !== null")  # the server took the upload
        page.reload()  # the job's progress survives a reload
        try:
            page.wait_for_selector("#job-book, #job .error", timeout=300_000)
        except sync_api.TimeoutError:  # say where the job stood, not only that the page waited
            jobs = [p.read_text() for p in (served / "jobs").glob("*.json")]
            raise AssertionError(f"page: {page.inner_text('#job')!r}; jobs: {jobs}") from None
        assert page.locator("#job-book").count() == 1, page.inner_text("#job")
        page.reload()  # a finished job is still shown after a reload
        page.wait_for_selector("#job-book")
        page.click("#job-book")
        page.wait_for_selector("#cast")
        cast = page.inner_text("#cast")
        assert "Anna" in cast and "Tom" in cast
        page.click("#cast a >> text=Anna")
        page.wait_for_selector("#contexts mark.m")
        assert "Anna" in page.inner_text("#contexts")
        page.go_back()
        page.wait_for_selector("#question")
        page.fill("#question", "Who rowed to the village for bread?")
        page.click("#ask button")
        page.wait_for_selector("#evidence mark.m")
        assert not page.is_disabled("#ask button")  # (disabled while the answer was on its way, with its seconds)
        ranking = page.inner_text("#ranking")
        # no network, and a reader (the tiny test model) the shipped fit was not measured with: the feature ranker's
        # order, and no probability, said so (a fit's probabilities hold for its own readers only)
        assert "Tom" in ranking and "%" not in ranking
        # in a reader's words: the terminal's sentence, a legend, no internals until Details is opened
        from whoqa.answer_view import headline
        from whoqa.service.schema import Ranked
        name = page.inner_text("#ranking tr:first-child").split("\t")[0].strip()
        assert page.inner_text("#headline") == headline(Ranked(0, name, None))
        assert "not the reader this ranking was measured with" in page.inner_text("#answer")
        assert "answer's mentions" in page.inner_text(".legend")
        assert not page.is_visible("#route")
        for internal in ("route", "llama", "gpt4all", "transformers", "ECE", "ROUGE", "support", "feature ranker"):
            assert internal not in page.inner_text("#answer"), internal
        page.click("#details summary")
        assert "route features" in page.inner_text("#route") and "no memory network" in page.inner_text("#route")
        assert "ECE" not in page.inner_text("#details")  # no calibration is claimed for an unmeasured reader
        assert page.locator("#evidence mark.m a").count() >= 1  # highlighted mentions link to characters
        page.screenshot(path=str(tmp_path / "who.png"), full_page=True)
        page.fill("#question", "Where did Anna row for bread?")  # not a Who question: the LLM, grounded or not
        # the button is disabled from the click until the answer comes (a second click asks nothing more)
        assert page.evaluate("() => { const b = document.querySelector('#ask button'); b.click(); return b.disabled; }")
        page.wait_for_selector("#grounds li")
        said = page.inner_text("#reader-answer")
        assert "did not find the answer" in said or page.locator("#grounds mark.m").count() >= 1, said
        for internal in ("route", "support", "ROUGE", "llama", "gpt4all"):
            assert internal not in page.inner_text("#answer"), internal
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        # every highlighted name opens that person: no link to a character the book's cast lacks
        hrefs = page.eval_on_selector_all("#answer a[href*='/char/']", "els => els.map(e => e.getAttribute('href'))")
        for href in set(hrefs):
            book_id, char = href.split("/book/")[1].split("/char/")
            got = page.request.get(f"http://127.0.0.1:{port}/api/books/{book_id}/characters/{char.split('?')[0]}")
            assert got.ok, (href, got.status)
        # a phone's width: the page fits in 390 px, the cast's charts included
        page.set_viewport_size({"width": 390, "height": 844})
        page.reload()  # (the book's page: its cast)
        page.wait_for_selector("#cast")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)
        page.goto(f"http://127.0.0.1:{port}/#/add")  # Upload with no file chosen says so
        page.click("#upload button")
        assert "choose a book file" in page.inner_text("#job .error")
        other = browser.new_page()  # another origin's page (same server, another host name) posting a form
        other.goto(f"http://localhost:{port}/")
        jobs = sorted((served / "jobs").glob("*.json"))
        other.evaluate(f"""async () => {{ const d = new FormData();
            d.append("file", new Blob(["Anna met Tom. Tom met Anna. Anna and Tom."]), "x.txt");
            await fetch("http://127.0.0.1:{port}/api/books", {{method: "POST", body: d, mode: "no-cors"}})
                .catch(e => null); }}""")
        assert sorted((served / "jobs").glob("*.json")) == jobs  # refused (403): no job, no book
    assert (tmp_path / "page.png").stat().st_size > 10_000
    if os.environ.get("WHOQA_SCREENSHOTS"):  # to read them: the page as a reader sees it
        for shot in ("who.png", "page.png", "phone.png"):
            shutil.copy(tmp_path / shot, Path(os.environ["WHOQA_SCREENSHOTS"]) / shot)


@pytest.fixture(scope="module")
def _chapters(tmp_path_factory):
    """A workspace holding test_first_use's two-chapter story, processed as an upload is: Jacob first appears in
    Chapter II, Anna and Tom in both chapters."""
    from typer.testing import CliRunner
    from cli import app
    from tests.test_first_use import CHAPTERS
    root = tmp_path_factory.mktemp("chapters")
    (root / "chapters.txt").write_text(CHAPTERS)
    r = CliRunner().invoke(app, ["prepare", "--workspace", str(root / "ws"), "--text", str(root / "chapters.txt")])
    assert r.exit_code == 0, r.output
    (book,) = [p.name for p in (root / "ws" / "books").iterdir()]
    return root / "ws", book


@pytest.fixture
def chapters(_chapters, tmp_path):
    ws, book = _chapters
    shutil.copytree(ws, tmp_path / "ws")
    return tmp_path / "ws", book


def _chapter_two(ws, book_id) -> int:
    """The id of the sentence "CHAPTER II" (found in the book's own text, not by Book.cut): what is read up to it."""
    from whoqa.core.book import Book
    book = Book.load(ws / "books" / book_id, book_id)
    (sid,) = [s for s in range(len(book.sentences)) if book.sentence_text(s)[0] == "CHAPTER II"]
    return sid


def test_the_cast_read_up_to_a_point_has_no_one_who_appears_later(chapters):
    """Issue 54, no spoilers in the cast: with ?upto= (as ask's), Jacob, first named in Chapter II, is not in the
    cast, nor can his page be opened; Anna and Tom are counted by their mentions before the cut, spread over the tenths
    of the part read. Without it (or with an empty one) the whole book's cast, as before."""
    from whoqa.core.book import Book
    ws, b = chapters
    c, cut = client(ws, llm="none"), _chapter_two(ws, b)
    whole = c.get(f"/api/books/{b}/characters").json()
    jacob = next(x["id"] for x in whole if x["name"].startswith("Jacob"))
    assert c.get(f"/api/books/{b}/characters/{jacob}").status_code == 200
    assert c.get(f"/api/books/{b}/characters", params={"upto": ""}).content == \
        c.get(f"/api/books/{b}/characters").content
    book = Book.load(ws / "books" / b, b)
    for upto in ("Chapter 2", "CHAPTER II", "50%"):
        page = c.get(f"/api/books/{b}", params={"upto": upto}).json()
        assert page["upto"] == {"spec": upto, "sentences": cut, "of": len(book.sentences)}
        cast = c.get(f"/api/books/{b}/characters", params={"upto": upto}).json()
        assert page["cast"] == cast and cast and page["characters"] == len(cast)  # the header's count: so far
        assert all("Jacob" not in x["name"] and not any("Jacob" in a for a in x["aliases"]) for x in cast), cast
        r = c.get(f"/api/books/{b}/characters/{jacob}", params={"upto": upto})
        assert r.status_code == 404 and "Jacob" not in r.text
        for x in cast:
            before = sum(1 for m in book.mentions if m.char_id == x["id"] and book.tokens[m.end].sentence < cut)
            after = next(w["mentions"] for w in whole if w["id"] == x["id"])
            assert x["mentions"] == before == sum(x["per_tenth"]) and 0 < before < after, (x, after)
            assert any(x["per_tenth"][5:]), x  # over the part read: with the whole book's tenths, all in its first half
    assert {x["name"] for x in cast} == {"Anna", "Tom"}
    full = c.get(f"/api/books/{b}/characters", params={"upto": "100%"})
    assert full.content == c.get(f"/api/books/{b}/characters").content  # the whole book read: the whole cast


def test_a_characters_mentions_read_up_to_a_point_are_all_before_it(chapters):
    ws, b = chapters
    c, cut = client(ws, llm="none"), _chapter_two(ws, b)
    anna = next(x["id"] for x in c.get(f"/api/books/{b}/characters").json() if x["name"] == "Anna")
    whole = c.get(f"/api/books/{b}/characters/{anna}").json()
    assert any(x["sentence"] >= cut for x in whole["contexts"])  # she is in Chapter II too
    one = c.get(f"/api/books/{b}/characters/{anna}", params={"upto": "Chapter 2"}).json()
    assert one["upto"] == {"spec": "Chapter 2", "sentences": cut, "of": whole["contexts"][-1]["sentence"] + 1}
    assert one["contexts"] and all(x["sentence"] < cut for x in one["contexts"])
    assert [x for x in whole["contexts"] if x["sentence"] < cut] == one["contexts"]
    assert one["sentences_with_mentions"] == len(one["contexts"]) < whole["sentences_with_mentions"]
    assert "Jacob" not in json.dumps(one) and one["mentions"] < whole["mentions"]


def test_served_read_only_without_an_index_the_cast_is_cut_too(chapters):
    """A read-only workspace whose book has no index (answers say so) still serves the cast, cut the same way."""
    ws, b = chapters
    served = shutil.copytree(ws, ws.parent / "served")  # (a workspace served read-only stays so in this process)
    ro = client(ws, read_only=True)
    cut = {p: ro.get(f"/api/books/{b}{p}", params={"upto": "Chapter 2"}) for p in ("", "/characters", "/characters/1")}
    assert not (ws / "index").exists() and all(r.status_code == 200 for r in cut.values())
    assert "Jacob" not in cut[""].text and "Jacob" in ro.get(f"/api/books/{b}").text
    for p, r in cut.items():  # as a workspace served to write cuts it (ask's own cut book, beside its index)
        assert r.content == client(served).get(f"/api/books/{b}{p}", params={"upto": "Chapter 2"}).content, p
    assert (served / "index").is_dir()


def test_a_bad_upto_for_the_cast_is_asks_one_line_400(chapters):
    ws, b = chapters
    c = client(ws, llm="none")
    anna = c.get(f"/api/books/{b}/characters").json()[0]["id"]
    for upto, why in (("Chapter 9", "no line of this book"), ("150%", "between 0% and 100%"), ("  ", "give a share")):
        ask = c.post(f"/api/books/{b}/ask", json={"question": "Who lit the lamp?", "upto": upto})
        assert ask.status_code == 400 and why in ask.json()["error"], ask.text
        for path in (f"/api/books/{b}", f"/api/books/{b}/characters", f"/api/books/{b}/characters/{anna}"):
            r = c.get(path, params={"upto": upto})
            assert (r.status_code, r.json()) == (400, ask.json()) and "\n" not in r.json()["error"], (path, r.text)


def test_the_page_reads_the_cast_up_to_a_point_in_a_real_browser(chapters):
    """The page's "read up to" field: Enter there (no question) draws the cast again up to it with a note saying so,
    without Jacob; the address and the character links keep it (the answer's links too), and so does the way back; a
    bad one is its line, and an empty one the whole cast again."""
    ws, b = chapters
    with _chromium_on_server(workspace=str(ws), llm="none") as (port, browser, sync_api):
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/#/book/{b}")
        page.wait_for_selector("#cast")
        assert "Jacob" in page.inner_text("#cast") and page.locator("#cast-note").count() == 0
        whole = page.inner_text("#counts")
        page.fill("#upto", "Chapter 2")
        page.press("#upto", "Enter")
        page.wait_for_selector("#cast-note")
        assert "As of Chapter 2" in page.inner_text("#cast-note") and "Jacob" not in page.inner_text("#cast")
        # the header counts the part read, as after a reload (before, it kept the whole book's until one)
        counts = page.inner_text("#counts")  # the part read, and the people in it as the table lists them
        people = page.locator("#cast tr").count() - 1
        assert counts != whole and counts.endswith(f"{people} {'person' if people == 1 else 'people'} in them"), counts
        assert "people" in whole
        assert page.inner_text("#answer") == ""  # no question: only the cast followed the cut
        assert page.evaluate("location.hash") == f"#/book/{b}?upto=Chapter%202"
        page.click("#cast a >> text=Anna")
        page.wait_for_selector("#contexts mark.m")
        assert page.evaluate("location.hash").endswith("?upto=Chapter%202")
        assert "As of Chapter 2" in page.inner_text("#cast-note") and "Jacob" not in page.inner_text("#contexts")
        assert all(h.endswith("?upto=Chapter%202") for h in page.eval_on_selector_all(
            "#contexts a", "els => els.map(e => e.getAttribute('href'))"))
        page.click("#back")
        page.wait_for_selector("#cast-note")
        assert page.input_value("#upto") == "Chapter 2" and "Jacob" not in page.inner_text("#cast")
        page.fill("#question", "Who rowed to the village for bread?")
        page.click("#ask button")  # answered up to the cut, its mentions linked to the cast up to it
        page.wait_for_selector("#evidence mark.m")
        links = page.eval_on_selector_all("#answer a[href*='/char/']",
                                          "els => els.map(e => e.getAttribute('href'))")
        assert links and all(h.endswith("?upto=Chapter%202") for h in links)
        assert "Jacob" not in page.inner_text("#answer")
        page.fill("#upto", "Chapter 9")
        page.press("#upto", "Enter")
        page.wait_for_selector("#upto-note.error")  # said beside the box, the cast kept as it was
        assert "no line of this book" in page.inner_text("#upto-note") and page.locator("#cast").count() == 1
        assert "--upto" not in page.inner_text("#upto-note") and "Jacob" not in page.inner_text("#cast")
        page.fill("#upto", "")
        page.press("#upto", "Enter")
        page.wait_for_selector("#cast")
        assert "Jacob" in page.inner_text("#cast") and page.evaluate("location.hash") == f"#/book/{b}"
        assert page.inner_text("#counts") == whole


def test_the_page_is_told_the_stage_of_an_upload_and_of_an_answer(chapters, tmp_path):
    """Issue 54: while an upload is processed its job says the stage (with a percent where the amount of work is
    known), and while an answer is under way `GET /api/progress` says its stage; idle, no stage. Polled from another
    thread as the page polls, so what is seen is what a page would see."""
    import threading
    from tests.test_first_use import CHAPTERS
    ws, book = chapters
    c = client(ws, llm="none")
    assert c.get("/api/progress").json() == {"stage": None}
    story = CHAPTERS.replace("Lighthouse", "Beacon").replace("Anna", "Nora")  # a new book: processed
    job = c.post("/api/books", files={"file": ("beacon.txt", story.encode(), "text/plain")}).json()
    seen = []
    while job["state"] in ("queued", "running"):
        job = c.get(f"/api/jobs/{job['id']}").json()
        if job["state"] == "running" and job.get("progress"):
            seen.append(job["progress"])
        time.sleep(0.01)
    assert job["state"] == "done" and "progress" not in job, job
    stages = [p["stage"] for p in seen]
    assert stages and set(stages) <= {"reading the book", "loading the language parser", "finding the characters",
                                      "adding its characters to the word vectors"}, stages
    assert all(0 <= p["percent"] <= 100 for p in seen if "percent" in p)
    answered, during = {}, []
    asking = threading.Thread(target=lambda: answered.update(c.post(
        f"/api/books/{book}/ask", json={"question": "Who rowed to the village for bread?"}).json()))
    asking.start()
    while asking.is_alive():
        during.append(c.get("/api/progress").json()["stage"])
        time.sleep(0.005)
    asking.join()
    assert answered.get("characters"), answered
    assert {"opening the book and its index of passages", "answering"} & set(during), during
    assert c.get("/api/progress").json() == {"stage": None}  # the answer given, the stage is cleared


def test_the_file_picker_offers_the_formats_the_intake_reads(tmp_path):
    """One table of book formats (whoqa.core.text.FORMATS): the page's file picker offers every suffix it names, and
    `ask --help` names every format."""
    from typer.testing import CliRunner
    from cli import app
    from whoqa.core.text import FORMATS
    page = client(tmp_path / "ws").get("/").text
    accept = page.split('accept="')[1].split('"')[0].split(",")
    assert {s for f in FORMATS for s in f.suffixes} <= set(accept) and "{{" not in page
    help_text = " ".join(CliRunner().invoke(app, ["ask", "--help"], terminal_width=200).output.split())
    assert all(f.name.split(" (")[0] in help_text for f in FORMATS)


def test_the_page_loads_the_reading_models_before_the_first_question(served, tiny_llm_path, monkeypatch):
    """`serve` begins loading the LLMs a first Who question and a first other question read when it starts, so
    the first answers load no model: the answer waits only for its own reading."""
    from whoqa.service.models import Models
    loads = []
    real = Models._load
    monkeypatch.setattr(Models, "_load", lambda self, *a: loads.append(a[0]) or real(self, *a))
    c = client(served, llm=tiny_llm_path, device="cpu", warm=True)
    library = c.app.state.service
    library.warming.join(timeout=120)
    library.answers.models.settle()  # (the loads it began, finished)
    assert loads, "nothing was loaded when the page started"
    started = len(loads)
    for q in ("Who rowed to the village for bread?", "Where did Smith send the box?"):
        r = c.post(f"/api/books/{DYING_DETECTIVE}/ask", json={"question": q})
        assert r.status_code in (200, 404), r.text  # (404: nothing in the book matches: no model is read)
    assert len(loads) == started  # no model loaded after a question came


def test_the_serve_bench_times_a_new_books_first_answer_on_an_empty_workspace(tmp_path, tiny_llm_path, monkeypatch):
    """`whoqa bench serve --requests 0 --text BOOK` on an empty workspace: a new user's upload, the time to the first
    answer and from "ready" to it, over real HTTP."""
    from whoqa.web import bench
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    real = bench.ServeConfig
    monkeypatch.setattr(bench, "ServeConfig", lambda **kw: real(**kw, llm=tiny_llm_path, device="cpu"))
    monkeypatch.setattr(bench, "QUESTIONS", ["Who rowed to the village for bread?"])  # (words the story has)
    out = bench.run_serve(str(tmp_path / "ws"), requests=0, text=str(story))
    assert out["upload_route"] == "features" and 0 < out["ready_to_first_answer_s"] <= out["upload_to_first_answer_s"]
    assert "ask_ms_p50 (1 clients)" not in out  # (no workspace book was asked about)
