"""Quote, then answer: the reader first copies the sentence of its passages that answers, then answers from it.

The served reader writes a short answer and grounding keeps it where a passage sentence holds its words (ROUGE-L
0.4), else "not found" (after a second look). Here the same model reads the same passages, shots and budget as `ask`
gives it for a non-Who question, but is asked to copy the sentence that answers first ("Sentence: ..."), then to
answer in a few words ("Answer: ..."), or to write "Sentence: none". The copy must be a sentence of what it read (the
best ROUGE-L of the copy's content words against a passage sentence's, at least COPIED); the answer is shown with that
sentence as its evidence, and "not found" where it copies none. Two rules are scored: `quote` (a copied sentence is
enough) and `quote+support` (the answer's words must also be in the sentence it copied, grounding's threshold).

Judged by table.py against what `eval --data` served for the same questions: right answers shown, wrong ones
shown, not found, and the text metrics of the written answers, of those shown and of those withheld.

    python docs/experiments/reading-arms/quote.py --workspace WS --target WS/eval-data/unseen --per-book 10 \
        --out docs/experiments/reading-arms/quote_unseen_first10.jsonl.gz

(table.py scores it beside what `eval --data` served.)

Resumable: questions already in the output are skipped. One reading per question (no second look for the arm).
"""
from __future__ import annotations

import time

from whoqa.core.metrics import best_span_rouge_l
from whoqa.core.words import answer_tokens
from whoqa.llm.grounding import new_words, sentence_words_text, support
from whoqa.llm.reader import LLMReader, clean_answer, reading
from whoqa.retrieval.bm25f import NothingMatched, window_sentences

QUOTE_INSTRUCTION = ("Answer the question about a book. First copy, word for word, the one sentence of the passages "
                     "that answers it, after \"Sentence:\". Then, on the next line, answer with a short phrase of a "
                     "few words, not a sentence, after \"Answer:\". If no sentence of the passages answers it, write "
                     "\"Sentence: none\".")
NEW_TOKENS = 140  # a copied sentence (rarely over 80 tokens) and a short answer
COPIED = 0.75  # a copy's content words against a passage sentence's: a sentence copied with a word or two changed


def quote_prompt(question: str, passages: list[str], shots=(), characters=()) -> str:
    text = QUOTE_INSTRUCTION + "\n\n"
    if shots:
        text += "Examples of short answers, from other books:\n" + "".join(f"Q: {q}\nA: {a}\n" for q, a in shots) + "\n"
    text += "Passages from the book:\n" + "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)) + "\n\n"
    if characters:
        text += "Characters in the passages: " + ", ".join(characters) + "\n\n"
    return text + f"Question: {question}"


def parse(text: str) -> tuple[str | None, str]:
    """(the copied sentence, or None for "none" or no copy; the answer after it)."""
    sentence, answer = None, ""
    for line in text.splitlines():
        s = line.strip()
        if s.lower().startswith("sentence:"):
            body = s[len("sentence:"):].strip().strip('"\u201c\u201d').strip()
            sentence = None if body.lower().rstrip(".") in ("", "none") else body
        elif s.lower().startswith("answer:"):
            answer = clean_answer(s)
    return sentence, answer


def render(reader: LLMReader, text: str) -> list[int]:
    if reader.chat:
        ids = reader.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                   tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    bos = [reader.tokenizer.bos_token_id] if reader.tokenizer.bos_token_id is not None else []
    return bos + reader._ids(text + "\nSentence:")


def answer_row(svc, reader, q: dict) -> dict:
    ob = svc.open(q["document_id"])
    query = ob.query(q["question"])
    route = svc.route(q["document_id"], q["question"])
    _, cfg = svc.models.answering_llm(svc.models.routes().llm, route.options)
    wins = svc.passages(ob, query)
    row = {"question_id": q["question_id"], "book": q["document_id"], "question": q["question"],
           "answers": [q["answer1"], q["answer2"]], "route": route.name}
    try:
        passages, starts, shots, listed = reading(ob, query, wins, svc.models.pool(who=False), cfg)
    except NothingMatched:
        return {**row, "refused": True}
    t0 = time.perf_counter()
    _, kept = reader.prompt(q["question"], passages, shots, starts, cfg.order, listed)  # what `ask` would keep
    ids = render(reader, quote_prompt(q["question"], kept, shots, listed))
    newline = set(reader._ids("\n"))
    raw = reader.backend.generate(ids, NEW_TOKENS, [t for t in reader.stop if t not in newline], reader.pad,
                                  reader.tokenizer)
    copied, answer = parse(raw)
    sids = window_sentences(wins[:len(kept)])
    best, sid = 0.0, None
    if copied:
        want = answer_tokens(copied)
        for s in sids:
            r = best_span_rouge_l(want, answer_tokens(sentence_words_text(ob.book, s))) if want else 0.0
            if r > best:
                best, sid = r, s
    matched = sid is not None and best >= COPIED
    held = support(new_words(answer, query.asked), sentence_words_text(ob.book, sid)) if matched and answer else 0.0
    return {**row, "raw": raw, "copied": copied, "copy_match": round(best, 3), "sentence": sid if matched else None,
            "sentence_text": ob.book.sentence_text(sid)[0] if matched else None, "answer": answer,
            "support_in_sentence": round(held, 3), "prompt_tokens": len(ids),
            "seconds": round(time.perf_counter() - t0, 2)}


def reader_for(svc) -> LLMReader:
    """The served LLM, as `ask` loads it for other questions, with room for a sentence and an answer."""
    base, cfg = svc.models.answering_llm(svc.models.routes().llm)
    return LLMReader(base, None, cfg.prompt_tokens, NEW_TOKENS, cfg.chat, cfg.half, cfg.runtime)


if __name__ == "__main__":
    from arm import run

    def make(svc):
        reader = reader_for(svc)
        return lambda q: answer_row(svc, reader, q)
    run(make, lambda r: f"{r.get('copy_match')} {r.get('answer')!r}", __doc__)
