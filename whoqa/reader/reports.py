"""What the reader's stages report: typed results whose `summary()` is what `whoqa reader ...` prints. Each keeps
the record its stage saves (`record`), so the files on disk stay as they were."""
from __future__ import annotations

from dataclasses import dataclass


def _metrics(m: dict, names=("rouge_l", "bleu_1", "bleu_4", "em", "f1")) -> str:
    label = {"rouge_l": "ROUGE-L", "bleu_1": "BLEU-1", "bleu_4": "BLEU-4", "em": "EM", "f1": "F1", "meteor": "METEOR"}
    return ", ".join(f"{label[n]} {m.get(n, 0):.2f}" for n in names)


@dataclass
class PrereadReport:
    """`whoqa reader preread`: the stats saved with WS/models/preread/."""
    record: dict
    skipped: bool = False  # already done with this config and books

    def summary(self, workspace) -> str:
        r = self.record
        return (("already done with this config and books: " if self.skipped else "")
                + f"preread {r['passages']:,} passages of {r['books']} books in {r['seconds']}s "
                f"({r['passages_per_second']} passages/s); loss {r['loss_first']:.3f} -> {r['loss_last']:.3f} "
                f"-> {workspace}/models/preread")


@dataclass
class LookupReport:
    """`whoqa reader lookup`: the stats saved with WS/models/lookup[+copy]/, its held-out exact match included."""
    record: dict
    copy: bool = False
    skipped: bool = False

    def summary(self, workspace) -> list[str]:
        r, h = self.record, self.record["heldout"]
        lines = [("already done with this config and books: " if self.skipped else "")
                 + f"answer lookup on {r['questions']:,} artificial questions of {r['books']} books in {r['seconds']}s "
                 f"({r['examples_per_second']} q/s); loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}; held-out "
                 f"exact match {h['exact_match']:.1f}%, loss own/other passages {h['loss_own_input']:.3f}/"
                 f"{h['loss_other_input']:.3f} -> {workspace}/models/lookup" + ("+copy" if self.copy else "")]
        if len(h.get("exact_match_by_kind", {})) > 1:
            lines.append("held-out exact match by kind: " + ", ".join(f"{k} {v:.1f}%" for k, v in
                                                                     h["exact_match_by_kind"].items()))
        return lines


@dataclass
class ReaderRunReport:
    """`whoqa reader train`: a cross-validated run's summary.json record."""
    record: dict

    def summary(self, workspace) -> str:
        s = self.record
        return (f"{s['run']}: {s['questions']} questions in {s['folds']} book folds: {_metrics(s['metrics'])} -> "
                f"{workspace}/reader/runs/{s['run']}")


@dataclass
class ReaderFinalReport:
    """`whoqa reader train --final`: the reader `ask` serves."""
    name: str
    record: dict  # its training stats ("examples", ...)

    def summary(self, workspace) -> str:
        return (f"{self.name}: trained on {self.record['examples']} questions -> "
                f"{workspace}/models/reader/{self.name}/final")


@dataclass
class LLMRunReport:
    """`whoqa reader llm`: an LLM run's summary.json record (every short-answer form's metrics included)."""
    record: dict

    def summary(self, workspace) -> list[str]:
        s = self.record
        return [f"{s['run']}: {s['questions']} questions zero-shot, {s['seconds_per_question']} s/question, "
                f"{s['passages_mean']} passages in {s['prompt_tokens_mean']:.0f} prompt tokens: "
                f"{_metrics(s['metrics'], ('rouge_l', 'bleu_1', 'em', 'f1', 'meteor'))} -> "
                f"{workspace}/reader/llm/{s['run']}",
                "shortened: " + "; ".join(f"{n} {_metrics(v, ('rouge_l', 'meteor'))}"
                                          for n, v in s["shortened"].items())]
