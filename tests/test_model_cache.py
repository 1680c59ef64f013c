"""Joined models live beside the installed packages (the environment's share/whoqa): another HOME using the same
environment reuses what install.sh joined; an earlier version's joins under ~/.cache are kept, not joined again."""
import shutil
import sys

from whoqa.llm.models import cache_dir


def test_another_home_uses_the_models_the_environment_joined(tmp_path, monkeypatch):
    monkeypatch.delenv("WHOQA_CACHE", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "env"))
    joined = tmp_path / "env" / "share" / "whoqa" / "models"
    joined.mkdir(parents=True)
    for home in ("a", "b"):
        monkeypatch.setenv("HOME", str(tmp_path / home))
        assert cache_dir() == joined
    shutil.rmtree(joined)
    earlier = tmp_path / "b" / ".cache" / "whoqa" / "models"
    earlier.mkdir(parents=True)
    (earlier / "m.gguf").write_bytes(b"")
    assert cache_dir() == earlier  # the environment has none: the earlier joins stand
    monkeypatch.setenv("WHOQA_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" / "models"
