"""Where the rules' named-entity pronoun errors are on LitBank's shared documents: by pronoun kind (first person,
he/she, other) and place (narration or quotation), and the documents with the most first-person errors in narration.

    python docs/experiments/coref_errors.py [LITBANK_COREF_FOLDER]
"""
from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

from data_prep.coref import FEMALE, FIRST, MALE, quote_ids
from data_prep.engine_spacy import SpacyEngine
from data_prep.litbank import align, load_litbank, parse_docs, predicted


def main(folder: Path) -> None:
    docs = load_litbank(folder)
    engine = SpacyEngine()
    total, wrong, by_doc = Counter(), Counter(), defaultdict(Counter)
    for doc, parsed in zip(docs, parse_docs(engine, docs)):
        pred = align(predicted(engine, parsed), doc.mentions)
        qids = quote_ids(parsed.tokens)
        names_of = defaultdict(set)  # predicted cluster -> the gold entities of its names
        for span, (c, _) in pred.items():
            if span in doc.mentions and doc.mentions[span][1] == "PROP":
                names_of[c].add(doc.mentions[span][0])
        named = {e for e, kind in doc.mentions.values() if kind == "PROP"}
        for span, (e, kind) in doc.mentions.items():
            if kind != "PRON" or e not in named:
                continue
            word = parsed.tokens[span[0]].word.lower()
            group = "first person" if word in FIRST else "he/she" if word in MALE | FEMALE else "other"
            group += ", quotation" if qids[span[0]] >= 0 else ", narration"
            ok = span in pred and e in names_of.get(pred[span][0], ())
            total[group] += 1
            wrong[group] += not ok
            by_doc[doc.name][group] += not ok
    print(f"named-entity pronouns: {sum(total.values()):,}, wrong {sum(wrong.values()):,}")
    for g in sorted(total):
        print(f"  {g:26s} {total[g]:5d}, wrong {wrong[g]:5d}")
    print("most first-person errors in narration:")
    for name, c in sorted(by_doc.items(), key=lambda kv: -kv[1]["first person, narration"])[:6]:
        print(f"  {name[:50]:50s} {c['first person, narration']}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/litbank/coref"))
