"""The one prompt a local LLM reads, and its one few-shot policy, for what measures and what serves alike.

Re-ranking's name scores (whoqa.ranker.scores) and LLM runs (whoqa.llm.runs) measure with prompts built here;
the service's name scores (whoqa.ranker.serve.rank) and answers (whoqa.llm.reader.answer_from_book) serve with the
same ones, so the prompt that was measured is the prompt that is served.

Shot policies (SHOT_POLICIES): k (question, answer) pairs of other books' questions (never the asked book's).
- "question": drawn from a ShotPool with the seed `shot_seed(seed, question id)`, per question. The id is the
  question's in the workspace where it is one of the pool's questions (found by its book and text when the caller
  does not know it), so a question served gets the shots it was measured with; a question of no workspace (a new
  book, a question typed at `ask`) gets an id read from its text: the same question, the same shots, every time.
- "fixed": the first k of one seeded order of the pool that are not the asked book's (`ShotPool.fixed`): every
  question of a book gets the same shots, so the prompt's start (the instruction and the shots) is the same for all
  of them and llama.cpp reads it once per book (`LlamaCppPythonRuntime.score_names`). A fit made so records those
  first examples (`fixed_examples`), and a workspace without questions of its own (a user's) is served them.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path

from whoqa.core.registry import check_name

INSTRUCTION = "Answer the question about a book with a short phrase of a few words, not a sentence."
SHOT_STRIDE = 1_000_003  # seed * SHOT_STRIDE + question id: one draw per (seed, question)
SHOT_POLICIES = ("question", "fixed")
FIXED_KEPT = 12  # the fixed order's first examples a fit records: k of them are never all one book's

Shot = tuple[str, str]  # (question, answer)


def prompt_text(question: str, passages: list[str], shots=(), characters=()) -> str:
    """The prompt's text before the model's own format (chat template or plain) wraps it: the instruction, the
    examples, the passages, the characters they mention, the question."""
    text = INSTRUCTION + "\n\n"
    if shots:
        text += "Examples from other books:\n" + "".join(f"Q: {q}\nA: {a}\n" for q, a in shots) + "\n"
    if passages:
        text += "Passages from the book:\n" + "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)) + "\n\n"
    if characters:
        text += "Characters in the passages: " + ", ".join(characters) + "\n\n"
    return text + f"Question: {question}"


def few_shots(pool: list[tuple[str, str, str]], book_id: str, k: int, seed: int) -> list[Shot]:
    """k (question, answer) pairs drawn (seeded) from other books' questions: never the asked book's."""
    others = [(q, a) for q, a, b in pool if b != book_id]
    return random.Random(seed).sample(others, min(k, len(others))) if k else []


def text_id(question: str) -> int:
    """A question's number where it has no id in a workspace: read from its text (stable across processes)."""
    return int(hashlib.sha256(" ".join(question.split()).encode("utf-8")).hexdigest()[:12], 16)


def shot_seed(seed: int, question_id: int) -> int:
    """The seed of one question's shots."""
    return seed * SHOT_STRIDE + int(question_id)


@dataclass
class ShotPool:
    """The questions shots are drawn from, in a fixed order, with their ids by (book, question text)."""
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # (question, answer, book), in draw order
    ids: dict[tuple[str, str], int] = field(default_factory=dict)  # (book, question) -> its id (the first one)

    @classmethod
    def of(cls, rows) -> "ShotPool":
        """A pool from (question, answer, book[, question id]) rows (a ShotPool is returned as it is)."""
        if isinstance(rows, ShotPool):
            return rows
        pool = cls()
        for row in rows:
            pool.rows.append(tuple(row[:3]))
            if len(row) > 3:
                pool.ids.setdefault((row[2], row[0].strip()), int(row[3]))
        return pool

    def question_id(self, book_id: str, question: str) -> int:
        """The question's id in the pool's workspace, else its text's number (`text_id`)."""
        found = self.ids.get((book_id, question.strip()))
        return found if found is not None else text_id(question)

    def shots(self, book_id: str, question: str, k: int, seed: int, question_id: int | None = None,
              policy: str = "question") -> list[Shot]:
        """The question's k shots under `policy` (module docstring)."""
        if check_shot_policy(policy) == "fixed":
            return self.fixed(book_id, k, seed)
        qid = question_id if question_id is not None else self.question_id(book_id, question)
        return few_shots(self.rows, book_id, k, shot_seed(seed, qid))

    def fixed_order(self, seed: int) -> list[tuple[str, str, str]]:
        """The pool's rows in the fixed policy's one seeded order."""
        rows = list(self.rows)
        random.Random(seed).shuffle(rows)
        return rows

    def fixed(self, book_id: str, k: int, seed: int) -> list[Shot]:
        """The first k of the seeded order that are not the asked book's: the same for every question of a book."""
        return first_shots(self.fixed_order(seed), book_id, k)


def check_shot_policy(policy: str) -> str:
    """The policy if it is one of SHOT_POLICIES, else one ValueError naming them."""
    return check_name("shot policy", policy, SHOT_POLICIES)


def shares_start(shots: int, policy: str) -> bool:
    """Whether every question of a book begins its prompt alike (no shots, or fixed ones), so that llama.cpp can keep
    that start read from one question to the next (`LLMReader.name_scores`)."""
    return shots == 0 or policy == "fixed"


def first_shots(rows, book_id: str, k: int) -> list[Shot]:
    """The first k (question, answer) of rows (question, answer, book) that are not the asked book's."""
    return [(q, a) for q, a, b in rows if b != book_id][:k]


def fixed_examples(pool: ShotPool, seed: int) -> list[list[str]]:
    """The fixed order's first FIXED_KEPT rows [question, answer, book], as a fit records them: the shots it is
    served with wherever its own pool is not there (a user's workspace has no questions)."""
    return [list(r) for r in pool.fixed_order(seed)[:FIXED_KEPT]]


def who_pool(workspace: Path) -> ShotPool:
    """The Who set's questions (the name scores' shots), in its order; empty without one."""
    from whoqa.core.store import load_who_set
    try:
        return ShotPool.of([(q["question"], q["answer1"], q["document_id"], q["question_id"])
                            for q in load_who_set(workspace)[1]])
    except (FileNotFoundError, ValueError, KeyError):
        return ShotPool()


SHIPPED_SHOTS = Path(__file__).with_name("shots.json")  # the answers' examples where a workspace has no questions


def shipped_pool(path: Path = SHIPPED_SHOTS) -> ShotPool:
    """The answers' example questions served where a workspace has none of its own (a user's): the main job's
    training workspace's questions (`write_shipped_pool`), so a user's book gets the shots `eval --data` measured
    answers with on the books held out from it, question by question; empty (with no file) as before."""
    from whoqa.core.artifacts import read_cache
    rows = (read_cache(path, dict) or {}).get("rows")
    ok = isinstance(rows, list) and all(isinstance(r, list) and len(r) == 3 for r in rows)
    if not ok and path.exists():
        import logging
        logging.getLogger(__name__).warning("%s is damaged (no rows of [question, answer, book]): answers are written "
                                            "without example questions; reinstall whoqa to mend it", path)
    return ShotPool.of([tuple(r) for r in rows]) if ok else ShotPool()


def write_shipped_pool(workspace: Path, path: Path = SHIPPED_SHOTS) -> int:
    """Write a workspace's `question_pool` (question, answer, book; in draw order) as the shipped examples; the
    number of rows."""
    import json
    from whoqa.core.files import atomic_write
    from whoqa.core.store import load_questions
    rows = [list(r) for r in question_pool(workspace).rows]
    if not rows:
        raise ValueError(f"{workspace} has no questions to ship as examples")
    head = {"about": "NarrativeQA questions (Kocisky et al. 2018, Apache-2.0) of the main job's training books: the "
                     "examples a local LLM's answers are prompted with where a workspace has no questions of its own "
                     "(whoqa.llm.prompt.shipped_pool)",
            "made_by": "python -c \"from whoqa.llm.prompt import write_shipped_pool; write_shipped_pool('ws')\" "
                       "after `whoqa reproduce main --workspace ws`",
            "books": len(load_questions(workspace))}
    lines = ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows)  # one example a line
    atomic_write(Path(path), json.dumps(head, ensure_ascii=False)[:-1] + ', "rows": [\n' + lines + "\n]}\n")
    return len(rows)


def question_pool(workspace: Path) -> ShotPool:
    """Every question of the workspace (the answers' shots), in the order an LLM run reads them (its examples: by
    book, whoqa.reader.data.build_examples); empty where it has none."""
    from whoqa.core.store import load_questions
    try:
        by_book = load_questions(workspace)
    except (FileNotFoundError, ValueError):
        return ShotPool()
    return ShotPool.of([(q["question"], q["answer1"], b, q["question_id"]) for b, qs in sorted(by_book.items())
                        for q in qs])
