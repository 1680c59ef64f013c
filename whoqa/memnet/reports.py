"""What the memory network's stages report: typed reports whose `summary()` is what their command prints, each
mirroring the record it saved (`whoqa pretrain`, `whoqa train --folds`, `whoqa train --final`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class PretrainReport:
    """What `whoqa pretrain` did; `record()` is the stats saved with the model (WS/models/<name>/config.json)."""
    questions: int
    books: int
    epoch_losses: list[float]
    seconds: float
    questions_per_second: float | None
    skipped: bool = False  # already done with this config and inputs: nothing trained

    @classmethod
    def from_record(cls, stats: dict, skipped: bool = False) -> "PretrainReport":
        return cls(stats.get("questions", 0), stats.get("books", 0), stats.get("epoch_losses", []),
                   stats.get("seconds", 0.0), stats.get("questions_per_second"), skipped)

    def record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "skipped"}

    def summary(self) -> str:
        return (("already done with this config and inputs: " if self.skipped else "")
                + f"pretrained on {self.questions:,} artificial questions from {self.books} books in {self.seconds}s "
                f"({self.questions_per_second} q/s); losses {self.epoch_losses}")


@dataclass
class TrainReport:
    """What a cross-validated run measured: `record` is its summary.json (metrics over folds x trials, the trials'
    ensemble and its calibration, provenance)."""
    run: str
    record: dict

    def summary(self) -> tuple[list[str], list[str]]:
        """(lines, warnings) as `whoqa train` prints them."""
        s = self.record
        lines = [f"{self.run}: {s['runs']} runs on {s['questions']} questions: P@1 {s['p@1']:.2f} ± {s['p@1_std']:.2f}, "
                 f"P@5 {s['p@5']:.2f} ± {s['p@5_std']:.2f}, MRR {s['mrr']:.3f} ± {s['mrr_std']:.3f}"]
        e = s.get("ensemble")
        if e:
            lines.append(f"  its {e['members']} trials averaged: P@1 {e['p@1']:.2f}, P@5 {e['p@5']:.2f}, "
                         f"MRR {e['mrr']:.3f}; ECE {e['calibration']['ece']:.3f} at temperatures fit on the other "
                         f"folds ({e['calibration']['ece_uncalibrated']:.3f} uncalibrated)")
        return lines, [s["redone"]] if s.get("redone") else []


@dataclass
class FinalReport:
    """What `whoqa train --final` made: the ensemble `ask` serves."""
    model: str
    questions: int
    skipped: dict  # questions left out, by reason
    members: int
    losses: list[float]  # each member's last epoch loss
    calibration: dict | None  # the temperature it serves with, and the run it was fit on (None: uncalibrated)

    def summary(self, workspace) -> str:
        cal = self.calibration
        return (f"{self.model}: {self.members} members trained on {self.questions} questions -> "
                f"{workspace}/models/{self.model}; "
                + (f"calibrated by run {cal['run']} (temperature {cal['temperature']:.2f})" if cal else
                   "not calibrated yet (no cross-validated run of this recipe): `ask` shows no probabilities"))
