"""`whoqa serve`: the JSON API on a small trained workspace, and the page end to end in a real headless Chromium."""
import json
import shutil
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
    assert None not in probs and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0001
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


def test_the_page_in_a_real_browser(served, tmp_path, tiny_llm_path):
    """Headless Chromium (Debian's, driven by Playwright) on a real uvicorn server over a workspace with no trained
    network: upload a short book, wait for it, open the cast and a character, ask a Who question and see a calibrated
    answer, the route that gave it and the evidence with its mentions highlighted; ask another question and see its
    answer with the sentences it rests on, or that it was not found. A page of another origin cannot upload."""
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: the browser test "
                                                                 "is skipped")
    if not browser_path:
        pytest.skip("no Chromium on this machine (apt-get install chromium): the browser test is skipped")
    import uvicorn
    shutil.rmtree(served / "models")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(ServeConfig(workspace=str(served), port=port,
                                                                  llm=tiny_llm_path, device="cpu")),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    story = tmp_path / "lighthouse.txt"
    story.write_text(STORY)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"])
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
            ranking = page.inner_text("#ranking")
            assert "Tom" in ranking and "%" in ranking  # no network: the feature ranker's calibrated answer
            assert "route features" in page.inner_text("#route") and "no memory network" in page.inner_text("#route")
            assert page.locator("#evidence mark.m a").count() >= 1  # highlighted mentions link to characters
            page.fill("#question", "Where did Anna row for bread?")  # not a Who question: the LLM, grounded or not
            page.click("#ask button")
            page.wait_for_selector("#grounds li")
            said = page.inner_text("#reader-answer")
            assert "did not find the answer" in said or page.locator("#grounds mark.m").count() >= 1, said
            page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
            other = browser.new_page()  # another origin's page (same server, another host name) posting a form
            other.goto(f"http://localhost:{port}/")
            jobs = sorted((served / "jobs").glob("*.json"))
            other.evaluate(f"""async () => {{ const d = new FormData();
                d.append("file", new Blob(["Anna met Tom. Tom met Anna. Anna and Tom."]), "x.txt");
                await fetch("http://127.0.0.1:{port}/api/books", {{method: "POST", body: d, mode: "no-cors"}})
                    .catch(e => null); }}""")
            assert sorted((served / "jobs").glob("*.json")) == jobs  # refused (403): no job, no book
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert (tmp_path / "page.png").stat().st_size > 10_000
