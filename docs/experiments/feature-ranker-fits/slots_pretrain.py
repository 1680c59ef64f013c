"""Issue 51: the slot network pretrained on one workspace's artificial questions without the books another workspace
judges it on (here: ws-main's 136 books, ws51's 41 left out, so no book-level CV fold holds a book it read):

    .venv/bin/python docs/experiments/feature-ranker-fits/slots_pretrain.py --workspace ws-main --without ws51 --out PRE

(`whoqa slots pretrain` does the same within one workspace, leaving out the books of its own Who set.)"""
import argparse
import json
import os
from pathlib import Path

from whoqa.memnet import slot_train as st

ap = argparse.ArgumentParser()
ap.add_argument("--workspace", type=Path, required=True)
ap.add_argument("--without", type=Path, required=True, help="a workspace whose books are left out")
ap.add_argument("--out", type=Path, required=True)
ap.add_argument("--epochs", type=int, default=st.SlotPretrainConfig.epochs)
a = ap.parse_args()
rec = st.pretrain(a.workspace, a.out, st.SlotPretrainConfig(epochs=a.epochs), set(os.listdir(a.without / "books")))
print(json.dumps({k: v for k, v in rec.items() if k != "books"}))
