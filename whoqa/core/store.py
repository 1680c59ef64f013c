"""The store: every workspace artifact's reader and writer, beside the path `Workspace` names for it.

The stages of data_prep make the artifacts through the writers here, and every layer of whoqa reads them through the
readers here (never data_prep), so a file's format is written down once. The binary caches of later stages
(indexes, memory arrays, models, runs) keep their readers with their makers; the table in docs/architecture.md
names them.

    WS/questions.json, summaries.json    `write_questions`, `load_questions`; `write_summaries`, `load_summaries`
    WS/texts.json                        `write_texts`, `load_texts` (books added from text files), `intake_gaps`
    WS/who/                              `write_who_set`, `load_who_set`, `fingerprint`
    WS/books/<id>/source.json            `write_source`, `read_source` (what a prepared book was made from)
    WS/engine.json, data.json            `write_engine_record`, `read_engine_record`; `write_data_record`,
                                         `recorded_data`; the commands that remake them: `prepare_command`,
                                         `book_command`, `redo_book`
    WS/prepare_report.json               `write_prepare_report`, `read_prepare_report`
    WS/artificial/<id>.jsonl.gz          `write_artificial`, `read_artificial`; report.json: `write_derive_report`,
                                         `read_derive_report`
    WS/embeddings/                       `write_corpus`, `save_vectors`, `write_vectors_config`, `read_state`,
                                         `load_vectors`; token names: `scoped`
    everything derived from one book     `forget_derived`
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shlex
import shutil
from pathlib import Path

from whoqa.core.artifacts import (DamagedArtifact, checksum_file, forget_checksum, load_binary, problem, read_cache,
                                  read_json, read_record, record_checksum, verify_checksum)
from whoqa.core.files import atomic_write
from whoqa.core.workspace import MissingStage, Workspace

SOURCE_FILE = "source.json"  # per prepared book: {"sha1" of its file, "encoding", "made_by"}
CHAR_PREFIX = "CHAR_"


def _prepare_first(workspace) -> str:
    return f"run `whoqa prepare --workspace {workspace}` first"


# --- the questions of the prepared books, their summaries, the books added from text files ------------------------
def write_questions(workspace: Path, questions: list[dict]) -> None:
    """WS/questions.json: every question of a prepared book."""
    atomic_write(Workspace(workspace).questions, json.dumps(questions, indent=0))


def load_questions(workspace: Path) -> dict[str, list[dict]]:
    path = Workspace(workspace).questions
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {_prepare_first(workspace)}")
    by_book: dict[str, list[dict]] = {}
    for q in read_json(path, f"run `whoqa prepare --workspace {workspace}` (it writes the questions again)", list):
        by_book.setdefault(q["document_id"], []).append(q)
    return by_book


def write_summaries(workspace: Path, summaries: dict[str, str]) -> None:
    atomic_write(Workspace(workspace).summaries, json.dumps(summaries))


def load_summaries(workspace: Path) -> dict[str, str]:
    """Each prepared book's NarrativeQA summary (WS/summaries.json: the BERT ranker trains on them)."""
    path = Workspace(workspace).summaries
    if not path.is_file():
        raise MissingStage(f"{path} is missing: run `whoqa prepare --workspace {workspace}` (it copies summaries.csv)")
    return read_json(path, f"run `whoqa prepare --workspace {workspace}` (it writes the summaries again)", dict)


def load_texts(workspace: Path) -> dict[str, dict]:
    """The books added from text files (WS/texts.json: book id -> its file, first line and title); {} when none were."""
    return read_record(Workspace(workspace).texts, "move it aside (`whoqa check --repair`); `whoqa ask --text` "
                       "records a text again", {})


def write_texts(workspace: Path, texts: dict[str, dict]) -> None:
    atomic_write(Workspace(workspace).texts, json.dumps(texts, indent=1))


def intake_gaps(workspace: Path, book_id: str) -> list[str]:
    """What a book taken in from a text file (data_prep.addbook.add_text) lacks of the records written after its
    files: folded into the word vectors (where the workspace has any), then listed in texts.json (last). [] when
    whole. A kill between the book's files and these (an upload cut short) leaves a book that looks whole on disk:
    the web server's recovery removes it, an upload of it again completes it, and `whoqa check` names it."""
    gaps = []
    state = read_state(workspace)
    if state is not None and book_id not in state.get("books", []):
        gaps.append("not folded into the word vectors (embeddings/state.json)")
    if book_id not in load_texts(workspace):
        gaps.append("not listed in texts.json")
    return gaps


# --- the Who set: WS/who/ ------------------------------------------------------------------------------------------
def write_who_set(workspace: Path, characters: dict, questions: list[dict], report: dict) -> None:
    ws = Workspace(workspace)
    atomic_write(ws.who_characters, json.dumps(characters, indent=0))
    atomic_write(ws.who_questions, json.dumps(questions, indent=1))
    atomic_write(ws.who_report, json.dumps(report, indent=1))


def load_who_set(workspace: Path) -> tuple[dict[str, list[dict]], list[dict]]:
    """(characters by book, Who questions): the one reader of WS/who/, every reader of the Who set goes through it
    (a missing file says which command makes it; a damaged one is DamagedArtifact, as `whoqa check` knows it)."""
    paths = [Workspace(workspace).who_characters, Workspace(workspace).who_questions]
    for p in paths:
        if not p.is_file():
            raise MissingStage(f"{p} is missing: {_prepare_first(workspace)}")
    repair = f"rebuild the Who set with `whoqa prepare --workspace {workspace}` (books already prepared are kept)"
    characters, questions = read_json(paths[0], repair, dict), read_json(paths[1], repair, list)
    if not all(isinstance(v, list) and all(isinstance(c, dict) for c in v) for v in characters.values()):
        raise DamagedArtifact(paths[0], "a book's characters are not a list of records", repair)
    if not all(isinstance(q, dict) and {"document_id", "question_id", "answers"} <= set(q) for q in questions):
        raise DamagedArtifact(paths[1], "a question is not a record with document_id, question_id and answers", repair)
    return characters, questions


def fingerprint(workspace: Path) -> str:
    h = hashlib.sha256()
    for path in (Workspace(workspace).who_characters, Workspace(workspace).who_questions):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


# --- what `prepare` records: each book's source, the engine, the data folder, its report ---------------------------
def write_source(folder: Path, source: dict) -> None:
    """A prepared book's SOURCE_FILE (written before the book's files: the book is done after them)."""
    atomic_write(Path(folder) / SOURCE_FILE, json.dumps(source))


def read_source(folder: Path) -> dict | None:
    """A prepared book's SOURCE_FILE (None for books prepared before it was kept)."""
    return read_record(Path(folder) / SOURCE_FILE, "delete it; `whoqa prepare` records the book's source again")


def write_engine_record(workspace: Path, record: dict) -> None:
    """WS/engine.json, written only when it differs (none yet, another, or a damaged one)."""
    path = Workspace(workspace).engine_record
    if read_cache(path) != record:
        atomic_write(path, json.dumps(record, indent=1))


def read_engine_record(workspace: Path) -> dict | None:
    """WS/engine.json: how the workspace's books are made; None when `prepare` never recorded it."""
    path = Workspace(workspace).engine_record
    if not path.is_file():
        return None
    return read_json(path, f"run `whoqa prepare --workspace {workspace}` again to record its engine", dict)


def write_data_record(workspace: Path, data: str, books: list[str], unlabeled: bool) -> None:
    """WS/data.json: the folder as an absolute path, the books chosen (accumulated over runs; None once a run took
    them all) and whether books-unlabeled/ was taken."""
    path = Workspace(workspace).data_record
    old = read_cache(path, dict) or {}
    data = str(Path(data).resolve())
    chosen = None
    if books and old.get("data") == data and isinstance(old.get("books"), list):
        chosen = sorted({*old["books"], *books})
    elif books and old.get("data") != data:
        chosen = sorted(books)
    rec = {"data": data, "books": chosen, "unlabeled": bool(unlabeled or old.get("unlabeled"))}
    if old != rec:
        atomic_write(path, json.dumps(rec, indent=1))


def recorded_data(workspace: str | Path) -> dict | None:
    """{"data", "books", "unlabeled"} as the workspace's `prepare` recorded them; for a workspace prepared before the
    record, its last report's where that named an absolute folder (a relative one depended on where it ran); else
    None."""
    ws = Workspace(workspace)
    rec = read_record(ws.data_record, f"delete it and run `whoqa prepare --workspace {workspace} --data DIR` (the "
                                      f"folder its books came from)")
    if rec and isinstance(rec.get("data"), str):
        return {"data": rec["data"], "books": rec.get("books"), "unlabeled": rec.get("unlabeled", True)}
    cfg = (read_prepare_report(ws) or {}).get("config") or {}
    if isinstance(cfg.get("data"), str) and Path(cfg["data"]).is_absolute():
        return {"data": cfg["data"], "books": cfg.get("books") or None, "unlabeled": cfg.get("unlabeled", True)}
    return None


def prepare_command(workspace: str | Path, *extra: str) -> str:
    """`whoqa prepare` for this workspace, exactly: the data folder its books came from and the books chosen
    (WS/data.json), never the default folder, whose other books it would add; where none is recorded, DIR is left
    for the user to name."""
    try:
        rec = recorded_data(workspace)
    except DamagedArtifact:  # (listed as damaged by the check itself)
        rec = None
    words = ["whoqa", "prepare", "--workspace", str(workspace), "--data", rec["data"] if rec else "DIR"]
    if rec and "--book" not in extra:
        words += [w for b in rec.get("books") or [] for w in ("--book", b)]
        words += [] if rec.get("unlabeled", True) else ["--no-unlabeled"]
    line = f"`{shlex.join([*words, *extra])}`"
    return line if rec else line + " (DIR: the NarrativeQA folder its books came from)"


def book_command(workspace: str | Path, folder: Path) -> str:
    """The command that makes one book again: `ask --text` of the file it was added from, else `prepare --book`."""
    source = read_cache(Path(folder) / "source.json", dict) or {}
    if isinstance(source.get("text"), str):
        return f"`{shlex.join(['whoqa', 'ask', '--workspace', str(workspace), '--text', source['text']])} " \
               f"QUESTION`"
    return prepare_command(workspace, "--book", Path(folder).name)


def redo_book(folder: str | Path) -> str:
    """The repair of a damaged book, one wording for `whoqa check` and for the error its reader raises: delete its
    folder, then the command that made it (a book added from a file is not in the data folder: `prepare --book`
    would not find it). A folder outside a workspace's books/ is only named."""
    folder = Path(folder)
    if folder.parent.name != "books":
        return f"delete its folder {shlex.quote(str(folder))} and make the book again"
    return f"delete {shlex.quote(str(folder))} and run {book_command(folder.parent.parent, folder)}"


def write_prepare_report(workspace: Path, config: dict, report: dict) -> None:
    atomic_write(Workspace(workspace).prepare_report, json.dumps({"config": config, "report": report}, indent=1))


def read_prepare_report(workspace: Path) -> dict | None:
    """The last `prepare`'s {"config", "report"}; None when missing or damaged (a record, nothing depends on it)."""
    return read_cache(Workspace(workspace).prepare_report, dict)


# --- artificial questions: WS/artificial/ --------------------------------------------------------------------------
def write_artificial(path: Path, questions: list[dict]) -> None:
    """A book's artificial questions, gzipped JSON lines with a checksum beside them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    text = "".join(json.dumps(q, separators=(",", ":")) + "\n" for q in questions)
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(text.encode("utf-8"))  # no time or name in the header: the same questions are the same bytes
    forget_checksum(path)
    os.replace(tmp, path)
    record_checksum(path)  # <id>.jsonl.gz.sha256: `whoqa check` and `read_artificial` compare


def read_artificial(path: Path) -> list[dict]:
    """A book's artificial questions; a truncated or unreadable file is DamagedArtifact (one line naming it and the
    command that makes it again)."""
    repair = (f"delete it and run `whoqa prepare --workspace {Path(path).parent.parent}` (its book's questions are "
              f"made again)")
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} is missing: {repair}")
    verify_checksum(path, repair)  # (an empty file too: a written one, even of no questions, has a gzip header)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
    except Exception as e:  # cut short or flipped bytes: BadGzipFile, EOFError, zlib.error, a cut JSON line
        raise DamagedArtifact(path, problem(e), repair) from None
    if not all(isinstance(r, dict) for r in rows):
        raise DamagedArtifact(path, "a line is not a question object", repair)
    return rows


def read_derive_report(workspace: Path) -> dict:
    """WS/artificial/report.json ({} when missing or damaged: its figures are counted again)."""
    return read_cache(Workspace(workspace).artificial_report, dict) or {}


def write_derive_report(workspace: Path, report: dict) -> None:
    atomic_write(Workspace(workspace).artificial_report, json.dumps(report, indent=1))


# --- word vectors: WS/embeddings/ ----------------------------------------------------------------------------------
def scoped(token: str, book_id: str) -> str:
    """A book-local CHAR_3 -> the corpus-wide CHAR_3@<book id prefix>; other tokens are lowercased."""
    if token.startswith(CHAR_PREFIX):
        return f"{token}@{book_id[:12]}"
    return token.lower()


def write_corpus(folder: Path, book_id: str, lines: list[str]) -> None:
    """A book's word2vec corpus file: one sentence per line."""
    atomic_write(Path(folder) / f"{book_id}.txt", "\n".join(lines) + "\n")


def read_state(workspace: Path) -> dict | None:
    """WS/embeddings/state.json: {"lineage", "rows", "books", "history"}; None before the first training.
    lineage names one from-scratch training: rows made by it (and the rows folded in since) keep their place."""
    ws = Workspace(workspace)
    path = ws.embeddings_state
    repair = (f"the word vectors' record is lost: run `whoqa prepare --workspace {workspace} --rebuild-vectors`, then "
              f"retrain the models")
    if path.is_file():
        return read_json(path, repair, dict)
    if ws.word2vec.is_file():  # vectors made before state.json existed
        vocab = ws.vocab.read_bytes()
        corpus = sorted(p.stem for p in ws.corpus.glob("*.txt"))
        rows = len(read_json(ws.vocab, repair, dict))
        return {"lineage": "legacy-" + hashlib.sha256(vocab).hexdigest()[:12], "rows": rows,
                "books": corpus, "history": []}
    return None


def save_vectors(model, workspace: Path, state: dict) -> None:
    """gensim's model (and the arrays it writes beside it) with their checksum, then vocab.json and state.json."""
    ws = Workspace(workspace)
    out, final = ws.embeddings, ws.word2vec
    try:
        model.save(str(out / "word2vec.tmp"))
    except BaseException:  # a full disk or an interruption: no half-written vectors are left behind
        for tmp in [out / "word2vec.tmp", *out.glob("word2vec.tmp.*")]:
            tmp.unlink(missing_ok=True)
        raise
    forget_checksum(final)
    os.replace(out / "word2vec.tmp", final)
    arrays = []
    for extra in out.glob("word2vec.tmp.*"):  # gensim writes big arrays beside the file
        arrays.append(out / extra.name.replace("word2vec.tmp", final.name))
        os.replace(extra, arrays[-1])
    record_checksum(final, *sorted(arrays))  # word2vec.model.sha256: `whoqa check` compares
    state["rows"] = len(model.wv)
    atomic_write(ws.vocab, json.dumps({w: i for i, w in enumerate(model.wv.index_to_key)}))
    atomic_write(ws.embeddings_state, json.dumps(state, indent=1))


def write_vectors_config(workspace: Path, config: dict, stats: dict) -> None:
    atomic_write(Workspace(workspace).embeddings / "config.json", json.dumps({"config": config, "stats": stats},
                                                                             indent=1))


def rebuild_vectors(workspace: Path) -> str:
    return (f"rebuild the vectors with `whoqa prepare --workspace {workspace} --rebuild-vectors` (with the --data "
            f"`whoqa check` names), then retrain the models")


def load_word2vec(workspace: Path):
    """The whole gensim Word2Vec model (to fold books into), checksum verified."""
    from gensim.models import Word2Vec
    return load_binary(Workspace(workspace).word2vec, lambda p: Word2Vec.load(str(p)), rebuild_vectors(workspace))


def load_vectors(workspace: Path):
    """The trained KeyedVectors."""
    from gensim.models import Word2Vec
    path = Workspace(workspace).word2vec
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {_prepare_first(workspace)}")
    # truncated, empty or otherwise unreadable (pickle, numpy arrays beside it): DamagedArtifact naming it
    return load_binary(path, lambda p: Word2Vec.load(str(p)).wv, rebuild_vectors(workspace))


# --- everything made of one book ----------------------------------------------------------------------------------
def forget_derived(workspace: Path, book_id: str) -> None:
    """Remove what later stages made of a book (the workspace names them: `Workspace.derived_from_book`), and the
    book itself and its texts.json entry, so its new text is not judged by its old artifacts."""
    ws = Workspace(workspace)
    for p in [*ws.derived_from_book(book_id), ws.book(book_id)]:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
            checksum_file(p).unlink(missing_ok=True)
    try:  # its texts.json entry too: an entry there then always means a book taken in whole (`intake_gaps`)
        texts = load_texts(ws)
    except DamagedArtifact:  # (named by `whoqa check`; not this removal's to mend)
        return
    if texts.pop(book_id, None) is not None:
        write_texts(ws, texts)
