"""Each rule alone (its first candidate, ties by the counts) on the readers' halves: the joint reading's first choice against the passages read one by one (votes weighed by rank; the best single-passage choice). Run from the repository root."""
import numpy as np
from whoqa.evaluation.choice_fit import load_rows, halves, features, right_of, COUNTS
from whoqa.ranker.reader_choice import CHOICE
rows = load_rows("docs/experiments/readers/rows_readers.jsonl.gz", "docs/experiments/readers/votes_readers.jsonl.gz")
fit_half, check = halves(rows)
w1 = np.array(rows[0]["counts_weights"])
for name, rs in (("fit", fit_half), ("check", check)):
    out = {}
    for rule in ("choice_first", "votes", "vote_choice"):
        hit = 0
        for r in rs:
            x = features(r); y = right_of(r)
            c = COUNTS + CHOICE.index(rule)
            key = x[:, c] + 1e-3 * (x[:, :COUNTS] @ w1) / 100  # the rule, ties by the counts
            if rule == "vote_choice":
                key = np.where(x[:, COUNTS] > 0, x[:, c], -99) + 1e-6 * (x[:, :COUNTS] @ w1)
            hit += bool(y[int(np.argmax(key))])
        out[rule] = f"{hit}/{len(rs)}"
    print(name, out)
