"""The rows' written answers re-linked by the linking that knows the book (whoqa.ranker.written.link(knows=True)), as new rows files beside the old (run from the repository root: python docs/experiments/readers/relink.py)."""
import gzip, json, sys
from pathlib import Path
from whoqa.service import Service, ServiceConfig
from whoqa.ranker.cast import cast_of
from whoqa.ranker.written import link

def relink(ws, rows_path, out, texts=None):
    svc = Service(Path(ws), ServiceConfig())
    rows = [json.loads(l) for l in gzip.open(rows_path, "rt")]
    changed = 0
    with gzip.open(out, "wt") as f:
        for r in rows:
            if "error" not in r:
                text = r.get("written_text") or (texts or {}).get(r["key"])
                ob = svc.open(r["book"])
                q = ob.read(r["question"])
                w = link(ob.book, ob.aliases, q, text, r["choice"]["sentences"], knows=True)
                cast = cast_of(ob.book)
                new = [cast.of(c) for c in w.linked if cast.of(c) is not None]
                if new[:1] != r["written"][:1]:
                    changed += 1
                    print(r["key"][:50], repr(text)[:60], r["written"][:1], "->", new[:1], w.unknown, w.outside, file=sys.stderr)
                r = {**r, "written": new, "written_text": text}
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print(rows_path, "changed", changed, "of", len(rows), file=sys.stderr)

texts = {r["key"]: r["text"] for r in (json.loads(l) for l in gzip.open("docs/experiments/reading-and-counting/written_pool_again_1.5b.jsonl.gz", "rt"))}
relink("ws51", "docs/experiments/readers/rows_nqa.jsonl.gz", "docs/experiments/readers/rows_nqa_knows.jsonl.gz", texts)
relink("ws-readers", "docs/experiments/readers/rows_readers.jsonl.gz", "docs/experiments/readers/rows_readers_knows.jsonl.gz")
