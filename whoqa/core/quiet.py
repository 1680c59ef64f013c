"""Output for people: the libraries' noise kept off the terminal unless asked for (`--verbose`), so what shows is the
answer. gpt4all's llama.cpp writes "Failed to load libllamamodel-mainline-cuda...: libcudart.so.11.0" to the process's
own stderr on every model load, and llama.cpp its loader's report: C code, which no Python setting reaches, so the
file descriptors themselves are pointed elsewhere while models load and answer."""
from __future__ import annotations

import logging
import os
import sys
import warnings
from contextlib import contextmanager

NOISY_LOGGERS = ("transformers", "gpt4all", "llama_cpp", "urllib3", "filelock", "huggingface_hub", "jnius", "numexpr")


@contextmanager
def quiet(on: bool = True):
    """While the block runs: what C code writes to fds 1 and 2 goes to /dev/null, while Python's sys.stdout and
    sys.stderr (the answer, the progress) still reach the terminal through copies of those fds; Python warnings and
    the noisy libraries' logs below ERROR are dropped. A stream that is not fd 1 or 2 (a test runner's) is left as it
    is: no C write reaches it anyway."""
    if not on:
        yield
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' bars too ("de-quantizing GGUF ...")
    if "transformers" in sys.modules:  # imported already: its own switch
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    levels = {n: logging.getLogger(n).level for n in NOISY_LOGGERS}
    saved = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for n in NOISY_LOGGERS:
                logging.getLogger(n).setLevel(logging.ERROR)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                stream = getattr(sys, name)
                try:
                    if stream.fileno() != fd:
                        continue
                except (AttributeError, OSError, ValueError):
                    continue
                stream.flush()
                copy = os.dup(fd)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
                mine = os.fdopen(copy, "w", buffering=1, encoding=stream.encoding, errors=stream.errors,
                                 closefd=False)
                setattr(sys, name, mine)
                saved.append((fd, name, stream, copy, mine))
            yield
        finally:
            for fd, name, stream, copy, mine in reversed(saved):
                mine.flush()
                setattr(sys, name, stream)
                os.dup2(copy, fd)
                os.close(copy)
            for n, level in levels.items():
                logging.getLogger(n).setLevel(level)
