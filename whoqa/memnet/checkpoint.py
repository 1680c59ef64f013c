"""Saved memory networks and the word vectors they were trained on.

A model keeps only the embedding rows it was trained with: a model fine-tuned with frozen embeddings on a pretrained
one keeps the pretrained rows, so a book folded into the vectors after pretraining stays new to it (and is adapted)
even when the fine-tuning ran after the fold-in.

A model folder (WS/models/<name>/) holds model.pt and config.json {"config", "stats", "vectors": {"lineage", "rows"}}.
The workspace's vectors only grow (books are folded in, see `embeddings.fold_in`), so a model loads onto a larger
vocabulary by keeping its own rows and taking the new ones from word2vec; vectors rebuilt from scratch (another
lineage) make it stale, and loading it then says what to retrain.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from whoqa.core.artifacts import DamagedArtifact, forget_checksum, problem, record_checksum, verify_checksum
from whoqa.core.files import atomic_write
from whoqa.memnet.config import saved_config
from whoqa.memnet.model import KVMemNet, MemNetConfig
from whoqa.core.runs import code_version


class StaleModel(ValueError):
    """A saved model does not fit the workspace's word vectors; the message says what to retrain."""


def save_model(model: KVMemNet, folder: Path, config: dict, stats: dict, vocab, prov: dict | None = None) -> None:
    """model.pt and config.json (config, stats, vectors, code version and, given a provenance, the run identity and
    inputs that say when the model is already done)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = model.state_dict()
    rows = getattr(model, "trained_rows", None)
    if rows is not None and not model.embed.weight.requires_grad:  # frozen rows past the pretrained ones are word2vec's
        state["embed.weight"] = state["embed.weight"][:rows]  # (rows, d): loading takes the rest from the vectors
    torch.save(state, folder / "model.tmp")
    forget_checksum(folder / "model.pt")
    os.replace(folder / "model.tmp", folder / "model.pt")
    record_checksum(folder / "model.pt")  # (model.pt.sha256: `whoqa check` and `load_model` compare)
    extra = {"identity": prov["identity"], "inputs": prov["inputs"]} if prov else {}
    atomic_write(folder / "config.json", json.dumps({"config": config, "stats": stats, "vectors": vocab.record(),
                                                     "code": code_version(), **extra}, indent=1))


def load_model(folder: Path, vocab, hops: int | None = None, device=None) -> KVMemNet:
    """The model of folder on vocab's embedding matrix: rows it was trained with are its own, rows folded in since
    come from word2vec. `model.trained_rows` is how many embedding rows (padding included) it was trained with."""
    folder = Path(folder)
    path = folder / "model.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    saved = saved_config(folder)
    rec = saved.get("vectors") or {}
    if rec.get("lineage") and rec["lineage"] != vocab.lineage:
        raise StaleModel(f"model {folder} was trained on word vectors {rec['lineage']} but the workspace's were "
                         f"rebuilt ({vocab.lineage}): retrain it (`whoqa pretrain` / `whoqa train ...`)")
    verify_checksum(path, retrain_command(path))
    try:
        state = torch.load(path, map_location="cpu")  # host memory first: the vectors are joined there, then moved
        w = state["embed.weight"]
    except Exception as e:  # cut short or not a state dict: named, with the command that makes it again
        raise DamagedArtifact(path, problem(e), retrain_command(path)) from None
    # w: (trained rows, d)
    if w.shape[0] > vocab.matrix.shape[0] or w.shape[1] != vocab.matrix.shape[1]:
        raise StaleModel(f"model {folder} has {w.shape[0] - 1} word vectors of size {w.shape[1]}, the workspace "
                         f"{vocab.matrix.shape[0] - 1} of size {vocab.matrix.shape[1]}: retrain it")
    state["embed.weight"] = torch.cat([w, vocab.matrix[w.shape[0]:].to(w.dtype)])  # (rows now, d)
    hops = hops or saved.get("config", {}).get("hops", 3)
    model = KVMemNet(vocab.matrix, MemNetConfig(hops=hops, salience="salience_w" in state,
                                                roles="role_gate.weight" in state))
    model.load_state_dict(state)
    model.trained_rows = int(w.shape[0])
    model.eval()
    return model.to(device) if device is not None else model


def retrain_command(path: Path) -> str:
    """The command that makes a saved model (or one member of its ensemble) again, with the options it recorded."""
    path = Path(path)
    top = next((p for p in path.parents if p.parent.name == "models"), path.parent)
    return (f"retrain it: `whoqa {'pretrain' if top.name == 'pretrain' else 'train --final'} --workspace "
            f"{top.parent.parent}` with the options in {top / 'config.json'}")


def member_folders(folder: Path) -> list[Path]:
    """The folders of an ensemble's members (`train --final`): the model's own, then members/trial<t>/ in order."""
    folder = Path(folder)
    extra = sorted((folder / "members").glob("trial*/model.pt"), key=lambda p: int(p.parent.name[len("trial"):]))
    return [folder] + [p.parent for p in extra]


def load_members(folder: Path, vocab, device=None) -> list[KVMemNet]:
    """Every member of a saved ensemble (one model for a folder without members)."""
    return [load_model(f, vocab, device=device) for f in member_folders(folder)]
