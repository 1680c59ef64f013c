"""`whoqa reproduce NAME [--check]`: a reported table, kept as data (as pyserini keeps its reproduction matrices).

whoqa/evaluation/reproductions/<name>.json lists the commands behind each reported condition, in order, and the metrics they
should give: {"description", "hours", "steps": [[whoqa args...]], "expect": [{"file", "metric", "value",
"tolerance"}]}; an expected value that differs by CPU vendor also names the others' ({"by_cpu": {"AuthenticAMD":
28.25}}: MKL takes other code paths on AMD, and 60 epochs of training turn the last bit into other rankings). "{data}" and "{ws}" in the steps are the data folder and the workspace. Every step is one `whoqa`
command, resumable on its own (a step already done with the same config is skipped by the stage itself), so an
interrupted reproduction goes on where it stopped. With --check the results are compared with the expected values.
"""
from __future__ import annotations

import logging
import platform
import time
from functools import lru_cache
from pathlib import Path

from whoqa.core.artifacts import read_json, read_record

log = logging.getLogger(__name__)
FOLDER = Path(__file__).resolve().parent / "reproductions"


def available() -> list[str]:
    return sorted(p.stem for p in FOLDER.glob("*.json"))


def load(name: str) -> dict:
    path = FOLDER / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"no reproduction {name!r}: choose one of {', '.join(available())}")
    return read_json(path, "reinstall whoqa: the reproductions are part of the package", dict)


def commands(spec: dict, data: str, workspace: str) -> list[list[str]]:
    return [[a.replace("{data}", data).replace("{ws}", workspace) for a in step] for step in spec["steps"]]


def metric(workspace: Path, file: str, key: str | list[str]):
    """A value of a results file: "p@1", a dotted path such as "text.rouge_l" or "characters.0.0" (list items by
    position), or the path's parts as a list where a part holds a dot (a row named for a model such as "x-0.5b")."""
    path = Path(workspace) / file
    value = read_record(path, "run the reproduction's steps again (its results file is unreadable)", None,
                        (dict, list))
    if value is None:
        return None
    for part in key if isinstance(key, list) else key.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            value = None
    return value


@lru_cache(maxsize=1)
def cpu_vendor() -> str:
    """This machine's CPU vendor as the kernel names it ("GenuineIntel", "AuthenticAMD"), else the platform's own
    word for it (e.g. "arm")."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def expected(e: dict, vendor: str | None = None) -> dict:
    """An expect entry as it holds on this CPU vendor: its by_cpu value for the vendor, with a note saying whose value
    it is (or that the vendor was never measured: then the plain value, which may not hold there)."""
    if "by_cpu" not in e:
        return e
    vendor = vendor or cpu_vendor()
    if vendor in e["by_cpu"]:
        return {**e, "value": e["by_cpu"][vendor], "note": f"on {vendor}"}
    return {**e, "note": f"measured on {' and '.join(e['by_cpu'])} only, not on {vendor}"}


def check(spec: dict, workspace: Path, vendor: str | None = None) -> list[dict]:
    """Each expected metric with what the workspace holds and whether it is within tolerance (a text value, such as
    `ask`'s top answer, must be equal: its tolerance is 0), against this CPU vendor's value where they differ."""
    rows = []
    for e in spec["expect"]:
        e = expected(e, vendor)
        got = metric(workspace, e["file"], e["metric"])
        if isinstance(e["value"], str):
            ok = got == e["value"]
        else:
            ok = isinstance(got, (int, float)) and abs(got - e["value"]) <= e["tolerance"]
        rows.append({**e, "got": got, "ok": ok})
    return rows


RETRIES = 1  # times a step killed by a signal is run again (its finished work kept: every stage resumes)


def run(name: str, data: str, workspace: str, invoke, echo=print, do_check: bool = False) -> dict:
    """Run a reproduction's steps with invoke(args) -> exit code (a `whoqa` process: negative where a signal killed it),
    then check. A step a signal killed (a native library's crash: llama.cpp's CPU kernels once died with SIGSEGV 40
    minutes into the unseen books' answers) is run again, RETRIES times, with a counted warning; it goes on from the
    answers it had kept. Stops at a step that fails otherwise."""
    spec = load(name)
    steps = commands(spec, data, workspace)
    t0 = time.perf_counter()
    rerun = 0
    for k, args in enumerate(steps, 1):
        echo(f"[{k}/{len(steps)}] whoqa {' '.join(args)}")
        t = time.perf_counter()
        code = invoke(args)
        for _ in range(RETRIES):
            if code is None or code >= 0:
                break
            rerun += 1
            log.warning("step %d of reproduction %s was killed by signal %d: running it again from the work it kept",
                        k, name, -code)
            code = invoke(args)
        if code not in (0, None):
            why = f"killed by signal {-code}" if code < 0 else f"exit {code}"
            raise RuntimeError(f"step {k} of reproduction {name} failed ({why}): whoqa {' '.join(args)}")
        echo(f"    {time.perf_counter() - t:.0f}s")
    out = {"name": name, "seconds": round(time.perf_counter() - t0, 1), "steps_run_again": rerun}
    if do_check:
        out["check"] = check(spec, Path(workspace))
    return out
