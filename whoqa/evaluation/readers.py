"""`whoqa eval --questions FILE`: readers' own questions about whole novels, answered as `ask` serves them.

The file is the project's hand-written test set (data_prep/readers/questions.tsv): one question a row, six tab-separated
columns: book id, kind (who | other), the question, accepted answers (" | " between them), the line of the book
file that holds the answer and that line's text. Each book is taken in from BOOKS/<id>.txt as `ask` takes a file in,
then every question is answered by `Service.answer`, the one path `ask`, `chat` and the page take.

Judged by one rule each, printed beside every answer so it can be read by eye:
- Who: the rank of the first character whose name shares a name word with an accepted answer ("Sir Henry Curtis"
  matches "Curtis"; titles and "the" are not name words): P@1, P@5, MRR.
- Other: shown or withheld (no passage sentence held it), and right where the answer holds at least half the content
  words of an accepted answer (stems: "dies"/"died").
"""
from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

from whoqa.core.errors import DataError

STOP = {"the", "a", "an", "of", "to", "in", "on", "at", "by", "for", "with", "and", "or", "his", "her", "he", "she",
        "it", "is", "was", "be", "that", "this", "from", "as", "their", "they", "him", "into", "its", "are", "were"}
TITLE_WORDS = {"mr", "mrs", "miss", "ms", "dr", "sir", "lady", "lord", "captain", "colonel", "king", "queen", "madame",
               "monsieur", "mademoiselle", "m", "mme", "mlle", "judge", "count", "countess", "uncle", "aunt", "the"}
RIGHT_SHARE = 0.5  # of an accepted answer's content words an other answer must hold to count as right
SPLIT = Path(__file__).resolve().parents[2] / "data_prep" / "readers" / "split.tsv"  # book -> fit | check, fixed once


@dataclass
class ReaderQuestion:
    book: str  # the book's file id (BOOKS/<book>.txt)
    kind: str  # who | other
    question: str
    answers: list[str]
    line: int  # the book file's line (1-based) that holds the answer
    evidence: str  # that line's text


def load_questions(path: str | Path) -> list[ReaderQuestion]:
    """The rows of a readers' questions file; DataError naming the file and row for a row that is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: give a readers' questions TSV (e.g. data_prep/readers/questions.tsv)")
    rows = []
    with path.open(encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE), 1):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 6 or row[1] not in ("who", "other") or not row[4].isdigit():
                raise DataError(f"{path} row {n} is not 'book, who|other, question, answers, line, evidence' "
                                f"({len(row)} columns): fix that row")
            rows.append(ReaderQuestion(row[0], row[1], row[2], [a.strip() for a in row[3].split("|") if a.strip()],
                                       int(row[4]), row[5]))
    if not rows:
        raise DataError(f"{path} holds no questions")
    return rows


def load_split(path: str | Path = SPLIT) -> dict[str, str]:
    """book id -> "fit" or "check": the readers' questions split by book, fixed once (data_prep/readers/README.md).
    Choices (features, forms, weights) are made on the fit half; the check half only reports. {} without the file."""
    path = Path(path)
    if not path.is_file():
        return {}
    halves = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        book, _, half = line.partition("\t")
        if half not in ("fit", "check"):
            raise DataError(f"{path} line {n} is not 'book<TAB>fit|check': fix that line")
        halves[book] = half
    return halves


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower().replace("’", "'").replace("'s ", " "))


def name_words(name: str) -> set[str]:
    return {w for w in _words(name) if w not in TITLE_WORDS and len(w) > 1}


def who_rank(names: list[str], answers: list[str]) -> int | None:
    """1-based rank of the first name sharing a name word with an accepted answer; None if none does."""
    accepted = set().union(*(name_words(a) for a in answers)) if answers else set()
    for rank, name in enumerate(names, 1):
        if name_words(name) & accepted:
            return rank
    return None


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)]
    return word


def other_right(text: str | None, answers: list[str]) -> bool:
    """Whether an answer holds at least RIGHT_SHARE of some accepted answer's content words (stemmed)."""
    if not text:
        return False
    got = {_stem(w) for w in _words(text)}
    for a in answers:
        want = {_stem(w) for w in _words(a) if w not in STOP} or {_stem(w) for w in _words(a)}
        if want and len(want & got) >= RIGHT_SHARE * len(want):
            return True
    return False


def judge(q: ReaderQuestion, ans: dict) -> dict:
    """One answered question as the table counts it, with what was shown to read by eye."""
    row = {"book": q.book, "kind": q.kind, "question": q.question, "answers": q.answers, "line": q.line,
           "route": ans.get("route"), "seconds": ans.get("seconds")}
    if "error" in ans:
        return {**row, "error": ans["error"], "rank": None, "shown": False, "right": False}
    if q.kind == "who":
        names = [c["name"] for c in ans.get("characters", [])]
        rank = who_rank(names, q.answers)
        return {**row, "names": names, "rank": rank, "right": rank == 1}
    shown = ans.get("answer")
    text = shown if shown else ans.get("withheld")
    return {**row, "shown": bool(shown), "answer": shown, "withheld": ans.get("withheld"),
            "right": other_right(shown, q.answers), "right_if_shown": other_right(text, q.answers)}


def summary(rows: list[dict]) -> dict:
    who = [r for r in rows if r["kind"] == "who"]
    other = [r for r in rows if r["kind"] == "other"]
    out = {"who": len(who), "other": len(other)}
    if who:
        ranks = [r.get("rank") for r in who]
        out.update({"P@1": 100 * sum(r == 1 for r in ranks) / len(who),
                    "P@5": 100 * sum(r is not None and r <= 5 for r in ranks) / len(who),
                    "MRR": sum(1 / r for r in ranks if r) / len(who)})
    if other:
        out.update({"shown": sum(r.get("shown", False) for r in other), "right": sum(r["right"] for r in other),
                    "withheld_right": sum(r.get("right_if_shown", False) and not r.get("shown") for r in other)})
    return out


def table(rows: list[dict], split: dict[str, str] | None = None) -> str:
    """Per book, per half of the split (the check half is what a change is judged on) and overall: Who
    P@1/P@5/MRR, other answers shown / right / withheld but right."""
    split = load_split() if split is None else split
    books = sorted({r["book"] for r in rows}, key=lambda b: (split.get(b, ""), b))
    halves = [(f"{h} half", [r for r in rows if split.get(r["book"]) == h]) for h in ("fit", "check")]
    lines = ["book        Who  P@1    P@5    MRR    | other shown right withheld-right"]
    for name, part in [(f"{split.get(b, '')[:1]} {b[:8]}", [r for r in rows if r["book"] == b]) for b in books] \
            + [h for h in halves if h[1]] + [("all", rows)]:
        s = summary(part)
        lines.append(f"{name:<10} {s['who']:>4}  {s.get('P@1', 0):5.1f}  {s.get('P@5', 0):5.1f}  "
                     f"{s.get('MRR', 0):.3f}  | {s['other']:>5} {s.get('shown', 0):>5} {s.get('right', 0):>5} "
                     f"{s.get('withheld_right', 0):>8}")
    return "\n".join(lines)


def by_eye(rows: list[dict]) -> str:
    """Each question with what was served, to read."""
    out = []
    for r in rows:
        if r.get("error"):
            got = f"error: {r['error']}"
        elif r["kind"] == "who":
            got = f"rank {r['rank'] or '-'}: " + ", ".join(r["names"])
        else:
            got = f"shown: {r['answer']}" if r["shown"] else f"withheld: {r['withheld']}"
        out.append(f"[{'x' if r['right'] else ' '}] {r['question']}  (accepted: {' | '.join(r['answers'])})\n    {got}")
    return "\n".join(out)


def answered(svc, workspace: str | Path, questions: str | Path, rows_in: list[ReaderQuestion], ids: dict[str, str],
             progress: bool = True) -> list[dict]:
    """Each question judged as `svc` answers it, one JSON line a question in WS/served/readers-<key>.jsonl as it comes
    (whoqa.evaluation.unseen's writer: an interrupted run, or one a native crash killed, goes on where it stopped).
    The key: the questions file's contents, the reader, the passages and the code's commit, so no other reader,
    setting or code reuses an answer."""
    from dataclasses import asdict

    from whoqa.core.artifacts import file_sha256
    from whoqa.core.runs import code_version, digest
    from whoqa.core.workspace import Workspace
    from whoqa.evaluation.unseen import _served_rows
    key = digest([file_sha256(questions), str(svc.models.routes().llm), asdict(svc.cfg.passages),
                  code_version()["git"]])[:16]
    qs = [{"question_id": f"{q.book}:{k}", "document_id": ids[q.book], "question": q.question, "asked": q}
          for k, q in enumerate(rows_in)]

    def row(q, ans, refused):
        return {"question_id": q["question_id"], **judge(q["asked"], {"error": refused} if refused else ans.to_json())}
    return _served_rows(svc, Workspace(workspace).served / f"readers-{key}.jsonl", qs, row, "readers' questions",
                        progress)


def evaluate_readers_questions(workspace: str | Path, questions: str | Path, books: str | Path, llm: str | None = None,
                               device: str = "auto", out: str | Path | None = None, progress: bool = True,
                               passages: str | None = None, half: str | None = None, kinds: str = "both") -> dict:
    """Answer every question of the file as `ask` serves it, in a workspace of its own books (taken in from
    BOOKS/<id>.txt the first time); per-question rows to `out` (.jsonl, gzipped when it ends .gz) and the table.
    `half`: only the books of that half of the split (fit | check); `kinds`: who, other or both."""
    from whoqa.retrieval.passages import PassageConfig
    from whoqa.service import Service, ServiceConfig
    rows_in = load_questions(questions)
    if half is not None:
        if half not in ("fit", "check"):
            raise ValueError(f"--half {half!r}: use fit or check")
        split = load_split()
        rows_in = [q for q in rows_in if split.get(q.book) == half]
    if kinds not in ("who", "other", "both"):
        raise ValueError(f"--question-kinds {kinds!r}: use who, other or both")
    rows_in = [q for q in rows_in if kinds in ("both", q.kind)]
    if not rows_in:
        raise DataError(f"{questions} holds no {kinds} question of the {half} half")
    svc = Service(workspace, ServiceConfig(device=device, llm=llm, passages=PassageConfig(
        **({"fusion": passages} if passages else {}))))
    ids: dict[str, str] = {}
    for b in dict.fromkeys(q.book for q in rows_in):
        path = Path(books) / f"{b}.txt"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: pass --books with the folder holding the questions' books")
        ids[b] = svc.resolve(path)
    rows = answered(svc, workspace, questions, rows_in, ids, progress)
    if out:
        import gzip
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with (gzip.open(out, "wt", encoding="utf-8") if out.suffix == ".gz" else out.open("w", encoding="utf-8")) as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True) + "\n")
    split = load_split()
    halves = {h: summary(part) for h in ("fit", "check") if (part := [r for r in rows if split.get(r["book"]) == h])}
    return {"rows": rows, "summary": summary(rows), "halves": halves, "table": table(rows, split),
            "by_eye": by_eye(rows)}
