"""The FiD reader: each "question [SEP] passage" is encoded on its own, the encoder states of all of a question's
passages are concatenated, and the decoder attends over all of them while it generates the answer.

Works with any Hugging Face encoder-decoder (T5, BART, a saved EncoderDecoderModel) and, as the offline default, with
a bert2bert model built from the bundled MiniLM. Passages of a batch are packed (no padding passages are encoded);
fusing drops each passage's padding tokens, so examples with different passage counts share a batch and give the
same output as alone (cross-attention has no positions, so dropping masked tokens changes nothing).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import NamedTuple

import torch
from transformers.modeling_outputs import BaseModelOutput

from whoqa.core.artifacts import read_record, record_checksum, verify_checksum
from whoqa.core.device import as_device
from whoqa.core.minilm import bundled_minilm
from whoqa.reader.pointer import POINTER_FILE, CopyPointer, pointer_decode, previous_tokens
from whoqa.core.distributed import process_device, world
import shutil

log = logging.getLogger(__name__)
READER_FILE = "whoqa_reader.json"  # a saved reader's record: the config it was made with, its stats and lineage


def read_reader_record(folder: Path) -> dict | None:
    """A saved reader's record (READER_FILE, written by FiDReader.save), None when the folder holds none."""
    return read_record(Path(folder) / READER_FILE, f"delete {folder} and make it again (the command that trained it)")


def load_seq2seq(path: str | None):
    """(model, tokenizer) from a path: a seq2seq model (T5, BART, a saved reader) as it is, a BERT-like encoder as
    bert2bert (encoder and decoder both start from it; cross-attention and the LM head's transform are new)."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer, EncoderDecoderModel
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # a bar per weight file load is noise in a CLI that loads a model per fold
    path = path or bundled_minilm("pass --reader-base with a Hugging Face encoder-decoder (T5, BART) path")
    if not Path(path).exists() and "/" not in path:
        raise FileNotFoundError(f"reader model {path!r} not found: give a local folder or a Hugging Face model id")
    config = AutoConfig.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    if config.model_type == "encoder-decoder":
        model = EncoderDecoderModel.from_pretrained(path)
    elif getattr(config, "is_encoder_decoder", False):
        model = AutoModelForSeq2SeqLM.from_pretrained(path)
    else:
        import transformers
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # the load report lists the new cross-attention weights
        try:
            model = EncoderDecoderModel.from_encoder_decoder_pretrained(path, path)
        finally:
            transformers.logging.set_verbosity(verbosity)
    if config.model_type == "encoder-decoder" or not getattr(config, "is_encoder_decoder", False):
        start = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        end = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        model.config.decoder_start_token_id = start
        model.config.pad_token_id = tok.pad_token_id
        model.config.eos_token_id = end
        model.generation_config.decoder_start_token_id = start
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = end
        model.generation_config.bos_token_id = start
    return model, tok


class Fused(NamedTuple):
    """What the decoder reads: the fused encoder states (B, T, H), their mask (B, T) and, for a copy pointer, the
    token ids at those positions (B, T) (None when the reader has no pointer)."""
    states: torch.Tensor
    mask: torch.Tensor
    ids: torch.Tensor | None = None


class FiDReader(torch.nn.Module):
    def __init__(self, model, tokenizer, pointer: CopyPointer | None = None):
        super().__init__()
        self.model, self.tokenizer, self.pointer = model, tokenizer, pointer

    @classmethod
    def load(cls, path: str | None = None, device=None) -> "FiDReader":
        """A reader folder (with its copy pointer, if it has one) or a base model, on device (a torch.device or a
        --device value; None: auto)."""
        device = process_device(as_device(device), world())
        if path:  # a saved reader: its files as FiDReader.save wrote them (a base model or hub id has no record)
            verify_checksum(Path(path) / READER_FILE, f"delete {path} and train it again (the command that made it)")
        model, tok = load_seq2seq(path)
        pointer = None
        file = Path(path) / POINTER_FILE if path else None
        if file is not None and file.is_file():
            try:
                saved = torch.load(file, map_location=device)
                pointer = CopyPointer(*saved["dims"])
                pointer.load_state_dict(saved["state"])
            except Exception as e:  # a corrupt file, or a pointer of another version
                why = " ".join(str(e).split())  # one line: torch's messages span several
                raise ValueError(f"{file} is not a copy pointer this version of whoqa reads ({why}): train the "
                                 "reader again with --copy") from e
        return cls(model, tok, pointer).to(device)

    @property
    def device(self) -> torch.device:
        """Where the model is: batches, caches and decoding tensors are moved or made here."""
        return next(self.model.parameters()).device

    def add_pointer(self) -> None:
        """A fresh copy pointer (see whoqa.reader.pointer), sized for this model's decoder and encoder, unless it
        has one (a resumed or pretrained one is kept)."""
        if self.pointer is None:
            self.pointer = CopyPointer(self.model.get_decoder().config.hidden_size,
                                       self.model.get_encoder().config.hidden_size).to(self.device)

    def save(self, path: Path, extra: dict | None = None) -> None:
        """save_pretrained of model and tokenizer, and the copy pointer (a reader folder loads back with
        FiDReader.load)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        self.model.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        if self.pointer is not None:
            torch.save({"dims": list(self.pointer.dims), "state": self.pointer.state_dict()}, tmp / POINTER_FILE)
        (tmp / READER_FILE).write_text(json.dumps(extra or {}, indent=1))
        record_checksum(tmp / READER_FILE, *sorted(p for p in tmp.iterdir() if p.is_file() and p.name != READER_FILE))
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)

    @property
    def mask_token(self) -> str:
        tok = self.tokenizer
        if tok.mask_token:
            return tok.mask_token
        if "<extra_id_0>" in tok.get_vocab():  # T5: the first sentinel
            return "<extra_id_0>"
        raise ValueError("the reader's tokenizer has no mask token, needed by prereading")

    def encoder(self):
        return self.model.get_encoder()

    def encode_passages(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """input_ids, attention_mask: (P, L) all passages of a batch, packed -> states (P, L, H)."""
        return self.encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    @staticmethod
    def fuse(states: torch.Tensor, attention_mask: torch.Tensor, counts: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Concatenate each example's passages: states (P, L, H), mask (P, L), counts (B,) with sum = P ->
        fused (B, T, H), fused mask (B, T), T = the most real tokens of any example; an example's positions are its
        passages' real tokens in passage order, then padding (masked)."""
        pieces = []
        p = 0
        for n in counts:
            m = attention_mask[p:p + n].bool()  # (n, L)
            pieces.append(states[p:p + n][m])  # (real tokens, H)
            p += n
        return pad_states(pieces)

    def fuse_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, counts: list[int]) -> torch.Tensor | None:
        """The token ids at the fused positions (B, T) (as fuse orders states), for the copy pointer; None without."""
        if self.pointer is None:
            return None
        return self.fuse(input_ids[..., None], attention_mask, counts)[0][..., 0]

    def encode(self, input_ids, attention_mask, counts) -> Fused:
        """Packed passages (P, L), made on the host -> what the decoder reads, on the model's device: fused states
        (B, T, H), mask (B, T) [, ids (B, T)]."""
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        states, mask = self.fuse(self.encode_passages(input_ids, attention_mask), attention_mask, counts)
        return Fused(states, mask, self.fuse_ids(input_ids, attention_mask, counts))

    def loss(self, fused: Fused, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        """labels (B, A) with -100 at padding -> mean token negative log-likelihood (of the copy mixture when the
        reader has a pointer); reduction "sum": summed over the target tokens (data-parallel steps normalise it by the
        whole batch's count, whoqa.core.distributed)."""
        labels = labels.to(fused.states.device)
        enc = BaseModelOutput(last_hidden_state=fused.states)
        if self.pointer is None:
            out = self.model(encoder_outputs=enc, attention_mask=fused.mask, labels=labels)
            if reduction == "mean":
                return out.loss
            return torch.nn.functional.cross_entropy(out.logits.float().flatten(0, 1), labels.flatten(),
                                                     ignore_index=-100, reduction="sum")
        dec_in = self.model.prepare_decoder_input_ids_from_labels(labels=labels)  # (B, A)
        out = self.model(encoder_outputs=enc, attention_mask=fused.mask, output_hidden_states=True,
                         decoder_input_ids=dec_in)
        prev = previous_tokens(dec_in, self.model.generation_config.decoder_start_token_id)  # (B, A, 2)
        return self.pointer.nll(out.logits, out.decoder_hidden_states[-1], fused.states, fused.mask, fused.ids,
                                labels, prev, reduction)

    @torch.no_grad()
    def generate(self, fused: Fused, max_new_tokens: int = 32, num_beams: int = 1, no_repeat_ngram: int = 0) -> list[str]:
        """Answers (greedy when num_beams = 1; no_repeat_ngram > 0: no n-gram written twice); with a pointer, decoded
        over the copy mixture."""
        if self.pointer is None:
            ids = self.model.generate(encoder_outputs=BaseModelOutput(last_hidden_state=fused.states),
                                      attention_mask=fused.mask, max_new_tokens=max_new_tokens, num_beams=num_beams,
                                      no_repeat_ngram_size=no_repeat_ngram, do_sample=False)
        else:
            ids = pointer_decode(self.model, self.pointer, fused.states, fused.mask, fused.ids, max_new_tokens,
                                 num_beams, no_repeat_ngram=no_repeat_ngram)
        return [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]


def pad_states(pieces: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """[(T_i, H)] -> (B, max T_i, H) zero-padded, mask (B, max T_i) (1 = real)."""
    longest = max(1, max(p.shape[0] for p in pieces))
    h = pieces[0].shape[-1]
    out = pieces[0].new_zeros(len(pieces), longest, h)
    mask = torch.zeros(len(pieces), longest, dtype=torch.long, device=out.device)
    for i, p in enumerate(pieces):
        out[i, :p.shape[0]] = p
        mask[i, :p.shape[0]] = 1
    return out, mask
