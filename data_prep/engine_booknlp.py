"""The real BookNLP as a book engine, run as a subprocess in a Python environment the user names.

BookNLP's neural models need transformers <= 4.30, which cannot share an environment with this project's
transformers 5.x, so BookNLP runs in its own interpreter and we read the files it writes (the same contract as the
offline engine's). Its models are downloaded by BookNLP itself on first use; we check for them first so a machine
without them gets a clear message instead of a hang on the download.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from whoqa.core.seed import HASH_SEED

MODEL_FILES = {
    "small": ["entities_google_bert_uncased_L-4_H-256_A-4-v1.0.model",
              "coref_google_bert_uncased_L-2_H-256_A-4-v1.0.model",
              "speaker_google_bert_uncased_L-8_H-256_A-4-v1.0.1.model"],
    "big": ["entities_google_bert_uncased_L-6_H-768_A-12-v1.0.model",
            "coref_google_bert_uncased_L-12_H-768_A-12-v1.0.model",
            "speaker_google_bert_uncased_L-12_H-768_A-12-v1.0.1.model"],
}
MODEL_URL = "http://people.ischool.berkeley.edu/~dbamman/booknlp_models/"
INSTALL_HINT = """To use --engine booknlp:
  python3 -m venv booknlp-env && booknlp-env/bin/pip install booknlp==1.0.8 'transformers<=4.30' torch 'setuptools<81'
  booknlp-env/bin/python -m spacy download en_core_web_sm
  mkdir -p {models} && cd {models} && for f in {files}; do curl -O {url}$f; done
then pass --booknlp-python booknlp-env/bin/python (and --booknlp-models {models} if elsewhere).
BookNLP also fetches its BERT bases (google/bert_uncased_L-*) from the Hugging Face hub on first use.
Without these, use the default offline engine: --engine spacy."""

_RUN = """
import sys
from booknlp.booknlp import BookNLP
params = {"pipeline": "entity,quote,supersense,event,coref", "model": sys.argv[4], "model_path": sys.argv[5]}
BookNLP("en", params).process(sys.argv[1], sys.argv[2], sys.argv[3])
"""


class BookNLPUnavailable(RuntimeError):
    pass


class BookNLPEngine:
    name = "booknlp"
    writes_files = True

    def __init__(self, python: str | None = None, models: str | None = None, model: str = "small"):
        self.python = python or os.environ.get("WHOQA_BOOKNLP_PYTHON") or sys.executable
        self.models = Path(models or os.environ.get("WHOQA_BOOKNLP_MODELS") or Path.home() / "booknlp_models")
        self.model = model

    def check(self) -> None:
        """Raise BookNLPUnavailable saying what is missing and how to install it."""
        hint = INSTALL_HINT.format(models=self.models, files=" ".join(MODEL_FILES[self.model]), url=MODEL_URL)
        if not shutil.which(self.python) and not Path(self.python).is_file():
            raise BookNLPUnavailable(f"BookNLP engine: Python {self.python} not found.\n{hint}")
        probe = subprocess.run([self.python, "-c", "import booknlp, transformers; print(transformers.__version__)"],
                               capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            err = (probe.stderr.strip().splitlines() or ["?"])[-1]
            raise BookNLPUnavailable(f"BookNLP engine: {self.python} cannot import booknlp ({err}).\n{hint}")
        version = probe.stdout.strip()
        major_minor = tuple(int(x) for x in version.split(".")[:2] if x.isdigit())
        if major_minor > (4, 30):
            raise BookNLPUnavailable(f"BookNLP engine: {self.python} has transformers {version}; BookNLP's models "
                                     f"need transformers<=4.30 (newer ones fail on bert.embeddings.position_ids).\n{hint}")
        missing = [f for f in MODEL_FILES[self.model] if not (self.models / f).is_file()]
        if missing:
            raise BookNLPUnavailable(f"BookNLP engine: model file(s) missing from {self.models}: "
                                     f"{', '.join(missing)}.\n{hint}")

    def process_file(self, text: str, book_id: str, folder: Path) -> dict:
        from whoqa.core.book import SUFFIXES
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / f"{book_id}.txt"
            src.write_text(text, encoding="utf-8")
            out = Path(tmp) / "out"
            # (BookNLP's name clustering iterates sets of strings: its process hashes as whoqa's, whatever this one's)
            run = subprocess.run([self.python, "-c", _RUN, str(src), str(out), book_id, self.model, str(self.models)],
                                 capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": HASH_SEED})
            if run.returncode != 0:
                raise RuntimeError(f"BookNLP failed on {book_id}: {run.stderr.strip()[-2000:]}")
            folder.mkdir(parents=True, exist_ok=True)
            for s in SUFFIXES:  # .book last: its presence marks the book done
                produced = out / f"{book_id}{s}"
                if not produced.is_file():
                    raise RuntimeError(f"BookNLP wrote no {produced.name} for {book_id}")
                shutil.copy(produced, folder / f"{produced.name}.tmp")
                os.replace(folder / f"{produced.name}.tmp", folder / produced.name)
        return {"engine": "booknlp", "words": len(text.split())}
