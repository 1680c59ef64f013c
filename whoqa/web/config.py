"""`whoqa serve`'s settings, without the web libraries: the command line builds its options from these fields."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ServeConfig:
    workspace: str | None = None  # None: the data folder `whoqa ask` keeps books in (whoqa.core.workspace.default_home)
    host: str = "127.0.0.1"
    port: int = 8000
    read_only: bool = False  # serve a shared workspace: no uploads
    max_upload_mb: float = 20.0  # a long novel is 1-2 MB of text
    device: str = "auto"
    llm: str | None = None  # the local LLM that reads (default: the best measured one installed)
    warm: bool = True  # load the reading LLMs when serve starts and once a book is in: a first answer waits for none
    allow_hosts: list[str] = field(default_factory=list)  # other Host names the page is reached by (a proxy's)
