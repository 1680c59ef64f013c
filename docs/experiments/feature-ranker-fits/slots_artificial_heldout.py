"""Issue 51: the pretrained slot network on the artificial questions of books it never saw (the ws51 books that ws-main
holds), beside book frequency and the first character of each question's source sentence:

    .venv/bin/python docs/experiments/feature-ranker-fits/slots_artificial_heldout.py PRE   (paths: /work/ws-main, /work/ws51)"""
import json, os, sys
import numpy as np
from pathlib import Path
from whoqa.memnet import slot_train as st
from whoqa.core.metrics import ranking_metrics
from whoqa.core.numerics import intra_op_threads
ws = Path('/work/ws-main')
models, vocab = st.load(Path(sys.argv[1]))
held = sorted(set(os.listdir('/work/ws51/books')) & set(os.listdir(ws / 'books')))
with intra_op_threads(1):
    books = st.load_books(ws, held, vocab, progress=False)
    ex = st.artificial_examples(ws, books, vocab, 0.1, 13)
    got = st.predict(models[0], ex, books, 20)
ranked = [sorted(g, key=lambda c: -g[c]) for g in got]
m = ranking_metrics(ranked, [e.answers for e in ex])
freq = [[int(c) for c in books[e.book].char_ids[np.argsort(-books[e.book].counts, kind="stable")]] for e in ex]
f = ranking_metrics(freq, [e.answers for e in ex])
# the sentence's own characters only: how often the answer is the first-mentioned character of the source sentence
first = [[int(books[e.book].char_ids[books[e.book].chars[e.context[0]][0] - 1])] if books[e.book].chars[e.context[0]][0] else [] for e in ex]
fm = ranking_metrics(first, [e.answers for e in ex])
print(json.dumps({"books": len(books), "questions": len(ex), "network": m, "book_frequency": f, "first_in_source_sentence": fm}))
