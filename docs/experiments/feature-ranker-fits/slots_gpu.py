"""Issue 51, part 6: one pretraining run of the slot network on a GPU against the CPU, on the same examples.

The device machine has torch but neither the workspace nor gensim, so the run is split in two:

    # here: the books' slot arrays, the artificial examples and the word vectors, packed (word sums left out: rebuilt)
    .venv/bin/python docs/experiments/feature-ranker-fits/slots_gpu.py pack --workspace ws-main --without ws51 --out PACK
    # there (and here, for the CPU's figure): `slot_train.fit` on that pack, timed
    python docs/experiments/feature-ranker-fits/slots_gpu.py fit --pack PACK --device cuda --out REC.json

`fit` is the same call `whoqa slots pretrain` makes (`slot_train.fit`, one_book batches, the same config)."""
import argparse
import gzip
import json
import os
import pickle
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from whoqa.memnet import slot_train as st
from whoqa.memnet.slots import SlotConfig, SlotMemNet

ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["pack", "fit"])
ap.add_argument("--workspace", type=Path)
ap.add_argument("--without", type=Path)
ap.add_argument("--pack", type=Path)
ap.add_argument("--out", type=Path, required=True)
ap.add_argument("--device", default="cpu")
ap.add_argument("--fraction", type=float, default=1.0, help="share of the packed examples fitted (timing a slice)")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--epochs", type=int, default=st.SlotPretrainConfig.epochs)
a = ap.parse_args()
cfg = st.SlotPretrainConfig(epochs=a.epochs)

if a.mode == "pack":
    from whoqa.core.store import load_vectors
    from whoqa.core.workspace import Workspace
    from whoqa.memnet.slots import WordVocab
    ws = Workspace(a.workspace)
    vocab = WordVocab.from_keyed_vectors(load_vectors(ws))
    ids = sorted(p.name[:-len(".jsonl.gz")] for p in ws.artificial.glob("*.jsonl.gz"))
    skip = set(os.listdir(a.without / "books"))
    ids = [b for b in ids if b not in skip and (ws.books / b).is_dir()]
    books = st.load_books(ws, ids, vocab)
    examples = st.artificial_examples(ws, books, vocab, cfg.fraction, cfg.seed)
    for b in books.values():
        b.word_sums = None
    with gzip.open(a.out, "wb", compresslevel=6) as f:
        pickle.dump({"words": vocab.words, "matrix": vocab.matrix.half(), "books": books, "examples": examples}, f)
    print(json.dumps({"books": len(books), "questions": len(examples), "bytes": a.out.stat().st_size}))
else:
    torch.set_num_threads(a.threads)
    with gzip.open(a.pack, "rb") as f:
        pack = pickle.load(f)
    matrix = pack["matrix"].float()
    books = {b: sb.with_word_sums(matrix) for b, sb in pack["books"].items()}
    examples = pack["examples"][:int(len(pack["examples"]) * a.fraction)]
    torch.manual_seed(cfg.seed)
    model = SlotMemNet(matrix, SlotConfig(hops=cfg.hops, slots=cfg.slots)).to(a.device)
    t0 = time.perf_counter()
    losses = st.fit(model, examples, books, cfg.memories, cfg.epochs, cfg.lr, cfg.batch_size, cfg.seed,
                    progress=False, one_book=True)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    s = time.perf_counter() - t0
    rec = {"device": a.device, "name": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
           "threads": a.threads, "torch": torch.__version__, "pretrain": asdict(replace(cfg, device=a.device)),
           "questions": len(examples), "losses": losses, "seconds": round(s, 1),
           "questions_per_s": round(len(examples) * cfg.epochs / s, 1)}
    a.out.write_text(json.dumps(rec, indent=1))
    print(json.dumps(rec))
