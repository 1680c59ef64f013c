"""`whoqa prepare --executor ray` and `whoqa index --executor ray` on a real 2-node Ray cluster (a head and a worker node, 1 CPU each, in a network
namespace of their own so that Ray stays on loopback): the same bytes as `--jobs 2`, and a worker node killed with
kill -9 mid-run loses no book (its tasks are retried on the head node)."""
import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from tests.conftest import DYING_DETECTIVE, SHORT_BOOKS

BOOKS = [DYING_DETECTIVE, *SHORT_BOOKS, "08c3429e9717bc663bc5f41cd3a2c701c222ed2f"]
ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

CLUSTER = """set -e
ip link set lo up
export PATH={bin}:$PATH RAY_USAGE_STATS_ENABLED=0
cd {tmp}
ray start --head --port {port} --num-cpus 1 --include-dashboard=false > head.log 2>&1
before=$(pgrep -f raylet | sort)
ray start --address 127.0.0.1:{port} --num-cpus 1 > worker.log 2>&1
worker=$(comm -13 <(echo "$before") <(pgrep -f raylet | sort) | head -1)
prepare() {{ whoqa prepare --data {data} --workspace $1 --no-unlabeled --no-embeddings --jobs 2 \\
             --executor ray --ray-address 127.0.0.1:{port} > $1.log 2>&1; }}
status=0
prepare {tmp}/ws-ray || status=1
whoqa index --workspace {tmp}/ws-ray --executor ray --ray-address 127.0.0.1:{port} > index.log 2>&1 || status=1
whoqa rerank --candidates features --folds 2 --top-k 3 --workspace {tmp}/ws-ray --reader-base {llm} --device cpu \
    --executor ray --ray-address 127.0.0.1:{port} > rerank.log 2>&1 || status=1
whoqa reader llm --reader-base {llm} --context bm25f --sample 6 --workspace {tmp}/ws-ray --device cpu \
    --executor ray --ray-address 127.0.0.1:{port} > llm.log 2>&1 || status=1
prepare {tmp}/ws-kill &
run=$!
until ls {tmp}/ws-kill/books/*/*.book > /dev/null 2>&1; do sleep 0.2; done
kill -9 $worker  # the worker node dies with books still to do
echo "killed raylet $worker" > killed.txt
wait $run || status=1
ray stop --force > /dev/null 2>&1 || true
exit $status
"""


def _data(root: Path, shared: Path) -> Path:
    (root / "books").mkdir(parents=True)
    (root / "narrativeqa").mkdir()
    for b in BOOKS:
        shutil.copy(shared / "books" / f"{b}.txt", root / "books" / f"{b}.txt")
    for name in ("documents.csv", "qaps.csv"):
        shutil.copy(shared / "narrativeqa" / name, root / "narrativeqa" / name)
    return root


def _artifacts(ws: Path) -> list[Path]:
    """What `prepare` writes that must not depend on where it ran (its report holds timings and the executor)."""
    keep = [*ws.glob("books/*/*"), *ws.glob("who/*.json"), *ws.glob("artificial/*.jsonl.gz"), ws / "questions.json",
            *ws.glob("contexts/bm25f/*.json")]
    return sorted(p.relative_to(ws) for p in keep if p.is_file() and p.name not in ("summary.json", "report.json"))


def test_prepare_on_a_ray_cluster_writes_the_same_bytes_and_survives_a_killed_node(shared_data, tmp_path,
                                                                                   tiny_llm_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[default]'): the cluster test is skipped")
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip("the Ray cluster runs in a network namespace of its own: needs root, unshare and ip")
    data = _data(tmp_path / "data", shared_data)
    local = tmp_path / "ws-local"
    r = CliRunner().invoke(app, ["prepare", "--data", str(data), "--workspace", str(local), "--no-unlabeled",
                                 "--no-embeddings", "--jobs", "2"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["index", "--workspace", str(local), "--jobs", "2"])
    assert r.exit_code == 0, r.output
    llm = ["--reader-base", tiny_llm_path, "--device", "cpu", "--workspace", str(local)]
    r = CliRunner().invoke(app, ["rerank", "--candidates", "features", "--folds", "2", "--top-k", "3", *llm])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["reader", "llm", "--context", "bm25f", "--sample", "6", *llm])
    assert r.exit_code == 0, r.output
    script = CLUSTER.format(bin=VENV_BIN, tmp=tmp_path, data=data, port=6391, llm=tiny_llm_path)
    done = subprocess.run(["unshare", "-n", "bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=1200, env={**os.environ, "PYTHONHASHSEED": "0"})
    logs = {p.name: p.read_text()[-1500:] for p in tmp_path.glob("*.log")}
    assert done.returncode == 0, (done.stderr[-2000:], logs)
    assert (tmp_path / "killed.txt").is_file(), logs
    assert f"contexts for {len(BOOKS)} book(s)" in logs["index.log"], logs
    for ws in (tmp_path / "ws-ray", tmp_path / "ws-kill"):
        assert f"prepared {len(BOOKS)} book(s)" in (tmp_path / f"{ws.name}.log").read_text(), logs
        files = [f for f in _artifacts(local) if ws.name == "ws-ray" or f.parts[0] != "contexts"]
        assert files == [f for f in _artifacts(ws)] and len(files) > 4 * len(BOOKS)
        same, differ, missing = filecmp.cmpfiles(local, ws, [str(f) for f in files], shallow=False)
        assert not differ and not missing, (ws.name, differ, missing)
    # the LLM's name scores and answers as Ray tasks: the same rows as in this process (scores to float tolerance:
    # a task runs on 1 thread), and the same figures
    ray_ws = tmp_path / "ws-ray"
    for pattern in ("runs/features+by-book+folds2/rerank@*/scores.jsonl", "reader/llm/*/predictions.jsonl"):
        [here], [there] = sorted(local.glob(pattern)), sorted(ray_ws.glob(pattern))
        rows = [{r["question_id"]: r for r in map(json.loads, p.read_text().splitlines())} for p in (here, there)]
        assert rows[0].keys() == rows[1].keys() and len(rows[0]) >= 3, (pattern, logs)
        for q, a in rows[0].items():
            b = rows[1][q]
            if "llm" in a:
                assert a["candidates"] == b["candidates"] and a["llm"] == pytest.approx(b["llm"], abs=1e-3)
            else:
                assert a["prediction"] == b["prediction"] and a["passages_used"] == b["passages_used"]
    sums = [json.loads(next(w.glob("runs/features+by-book+folds2/rerank@*/summary.json")).read_text())
            for w in (local, ray_ws)]
    assert sums[0]["combined"] == sums[1]["combined"]
