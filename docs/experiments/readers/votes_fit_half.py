"""The votes' fitted arms where only the readers' rows have votes: every arm fit on the readers' fit half alone,
judged leave one book out (each fit-half novel by a fit on the other four), beside the same protocol for the arms
without votes. NarrativeQA's votes (votes_nqa.jsonl.gz) are what the full protocol needs. Run from the repository
root."""
from whoqa.evaluation.choice_fit import ARMS, halves, leave_one_book_out, load_rows

rows = load_rows("docs/experiments/readers/rows_readers.jsonl.gz", "docs/experiments/readers/votes_readers.jsonl.gz")
fit_half, _ = halves(rows)
for arm in ARMS:
    got = leave_one_book_out([], fit_half, arm, weight=1)
    print(f"{arm:<28} fit half (leave one book out, fit half alone) P@1 {got['p@1']:5.1f}  P@5 {got['p@5']:5.1f}  "
          f"MRR {got['mrr']:.3f}")

# the same fits (the whole fit half) judged on NarrativeQA's Who questions, which none of them saw, and the check half
from whoqa.evaluation.choice_fit import fit_arm, judged, ranked
nqa = load_rows("docs/experiments/readers/rows_nqa.jsonl.gz")
_, check = halves(rows)
for arm in ("counts+written", "counts+choice", "counts+choice+written"):
    w = fit_arm(fit_half, arm)
    a, c = judged(nqa, [ranked(r, arm, w) for r in nqa]), judged(check, [ranked(r, arm, w) for r in check])
    print(f"{arm:<28} fit on the fit half alone: NarrativeQA P@1 {a['p@1']:5.2f} ECE {a['ece']:.3f} | check half "
          f"(reported only) P@1 {c['p@1']:5.1f} P@5 {c['p@5']:5.1f} MRR {c['mrr']:.3f}")
