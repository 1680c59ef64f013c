"""What `whoqa index` did for one ranker: a typed report, written as WS/contexts/<ranker>/report.json and printed by
its `summary()` (the CLI formats nothing itself)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class IndexReport:
    ranker: str  # bm25f | bert | oracle
    books: int  # prepared books with questions
    done: list[str] = field(default_factory=list)  # books whose contexts were made now, in book order
    skipped: int = 0  # books already done with this config
    failed: dict[str, str] = field(default_factory=dict)  # book -> why (the others' work is kept)
    redone_config_changed: int = 0  # books whose contexts were made with another config, so made again
    config: dict = field(default_factory=dict)  # the RetrievalConfig
    ranker_config: dict | None = None  # bert: the RankerConfig
    folds: list[dict] | None = None  # bert: each book fold's ranker (books, training pairs and steps, losses)
    seconds: float = 0.0

    def to_json(self) -> dict:
        """The report.json record (bm25f's without the BERT fields, as before this was typed)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def summary(self, workspace) -> str:
        return (f"{self.ranker}: contexts for {len(self.done)} book(s), {self.skipped} already done with this config"
                + (f" ({self.redone_config_changed} redone: made with another config)"
                   if self.redone_config_changed else "")
                + f", {len(self.failed)} failed -> {workspace}/contexts/{self.ranker}")
