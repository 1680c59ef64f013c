"""`whoqa bench serve`: the web app under load, over real HTTP (uvicorn on 127.0.0.1, httpx clients).

Warm `POST /api/books/{id}/ask` latency p50/p95 with 1 and with 8 concurrent clients, the server process's peak
memory, and (given a text file the workspace has not seen) the time from upload to the first answer and from the book
being ready to it (with `--requests 0`, that alone, on any workspace: an empty one is a new user's).
"""
from __future__ import annotations

import resource
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from whoqa.web.app import ServeConfig, create_app

QUESTIONS = ["Who is the hero of the story?", "Who dies at the end?", "Who does the narrator meet?",
             "Who lives in the house?", "Who helps him escape?", "Who falls in love?", "Who betrays them?",
             "Who saves the child?"]


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def run_serve(workspace: str, book: str | None = None, requests: int = 80, text: str | None = None,
              warm: bool = True) -> dict:
    import httpx
    import uvicorn
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(ServeConfig(workspace=workspace, warm=warm))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    t0 = time.perf_counter()
    thread.start()
    while not server.started:
        time.sleep(0.01)
    out: dict = {"server_start_s": round(time.perf_counter() - t0, 2)}
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=600, headers={"X-Whoqa": "bench"}) as c:
            if requests:  # (0: only a new book's first answer, on an empty workspace)
                books = c.get("/api/books").json()
                if not books:
                    raise FileNotFoundError(f"no books in {workspace}: run `whoqa prepare` first")
                book = book or max(books, key=lambda b: b["words"])["id"]
                t = time.perf_counter()
                first = c.post(f"/api/books/{book}/ask", json={"question": QUESTIONS[0]})
                first.raise_for_status()
                out["first_ask_s (loads the model)"] = round(time.perf_counter() - t, 2)
                out["route"] = first.json()["route"]

                def one(i: int) -> float:
                    t = time.perf_counter()
                    q = QUESTIONS[i % len(QUESTIONS)]
                    c.post(f"/api/books/{book}/ask", json={"question": q}).raise_for_status()
                    return time.perf_counter() - t
                for clients in (1, 8):
                    with ThreadPoolExecutor(clients) as pool:
                        lat = list(pool.map(one, range(requests)))
                    out[f"ask_ms_p50 ({clients} clients)"] = round(1000 * _pct(lat, 0.5), 1)
                    out[f"ask_ms_p95 ({clients} clients)"] = round(1000 * _pct(lat, 0.95), 1)
            if text:
                t = time.perf_counter()
                with open(text, "rb") as f:
                    job = c.post("/api/books", files={"file": (Path(text).name, f, "text/plain")}).json()
                while job.get("state") in ("queued", "running"):
                    time.sleep(0.5)
                    job = c.get(f"/api/jobs/{job['id']}").json()
                if job.get("state") != "done":
                    raise RuntimeError(f"upload of {text} failed: {job.get('error')}")
                ready = time.perf_counter()  # (the page shows the book as ready here)
                a = c.post(f"/api/books/{job['book']}/ask", json={"question": QUESTIONS[0]})
                a.raise_for_status()
                out["upload_to_first_answer_s"] = round(time.perf_counter() - t, 2)
                out["ready_to_first_answer_s"] = round(time.perf_counter() - ready, 2)
                out["upload_route"] = a.json()["route"]
                out["upload_calibrated"] = a.json()["characters"][0]["probability"] is not None
                out["uploaded_words"] = len(Path(text).read_text(encoding="utf-8", errors="replace").split())
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    out["book"] = book
    out["requests_per_setting"] = requests
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out
