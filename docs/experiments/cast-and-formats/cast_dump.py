"""The 60 most mentioned name clusters ("characters") of each novel of the readers' questions, as `prepare` makes them,
with what the cast (whoqa.ranker.cast) does with each: the list the hand labels (cast_labels.tsv) were written on.

    .venv/bin/python docs/experiments/cast-and-formats/cast_dump.py WS BOOKS_DIR > clusters.tsv
"""
import sys
from pathlib import Path

from whoqa.core.book import Book
from whoqa.core.text import extract_body, read_book_text, text_book_id
from whoqa.evaluation.readers import load_questions
from whoqa.ranker.cast import cast_of

TOP = 60


def workspace_id(path: Path) -> str:
    return text_book_id(extract_body(read_book_text(path)))


def main(ws: str, books: str, questions: str = "data_prep/readers/questions.tsv") -> None:
    print("book\tcluster\tname\tcount\taliases\tcast")
    for b in dict.fromkeys(q.book for q in load_questions(questions)):
        wid = workspace_id(Path(books) / f"{b}.txt")
        book = Book.load(Path(ws) / "books" / wid, wid)
        cast = cast_of(book)
        order = sorted(book.characters, key=lambda c: (-book.characters[c].count, c))[:TOP]
        for cid in order:
            c = book.characters[cid]
            fate = (f"dropped: {cast.dropped[cid]}" if cid in cast.dropped else
                    f"person {cast.of(cid)}" + ("" if cast.of(cid) == cid else f" (merged into {cast.names[cast.of(cid)]})"))
            print(f"{b}\t{cid}\t{c.name}\t{c.count}\t{'; '.join(c.aliases[:8])}\t{fate}")


if __name__ == "__main__":
    main(*sys.argv[1:])
