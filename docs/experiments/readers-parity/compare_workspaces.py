"""Compare two workspaces made by the same commands (e.g. `whoqa reproduce smoke` before and after a change):
byte-identical files, and for those that differ, what differs once the workspace's own path, the vector lineage (a
fresh uuid per from-scratch training), timings, commits and the hashes built from them are masked; Lucene's segment
files carry a random id and are left out. Usage: python compare_workspaces.py OLD_WS NEW_WS"""
import json, sys, filecmp, re
from pathlib import Path
import numpy as np
a, b = Path(sys.argv[1]), Path(sys.argv[2])
la = next((a / "memdata").iterdir()).name; lb = next((b / "memdata").iterdir()).name
MASK = re.compile(r"second|time|_s$|^git$|identity|^started|^finished|^date|^when|^host|^seconds")
def norm(x, key=""):
    if isinstance(x, dict):
        return {k: norm(v, k) for k, v in x.items() if not MASK.search(k)}
    if isinstance(x, list):
        return [norm(v) for v in x]
    if isinstance(x, str) and re.fullmatch(r"[0-9a-f]{12,16}", x):
        return "<hash>"
    return x
def diff(x, y, path=""):
    if type(x) != type(y): return [f"{path}: {x!r} != {y!r}"[:200]]
    if isinstance(x, dict):
        out = []
        for k in sorted(set(x) | set(y)):
            out += diff(x.get(k), y.get(k), f"{path}.{k}")
        return out
    if isinstance(x, list):
        if len(x) != len(y): return [f"{path}: len {len(x)} != {len(y)}"]
        return [d for i, (u, v) in enumerate(zip(x, y)) for d in diff(u, v, f"{path}[{i}]")]
    return [] if x == y else [f"{path}: {x!r} != {y!r}"[:200]]
files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
same = differ_ok = 0; bad = []
for rel in files:
    pa, pb = a / rel, b / Path(str(rel).replace(la, lb))
    if not pb.is_file(): bad.append(f"{rel}: missing in new"); continue
    if filecmp.cmp(pa, pb, shallow=False): same += 1; continue
    if "index/bm25f" in str(rel): differ_ok += 1; continue  # Lucene writes a random segment id
    if rel.suffix == ".json":
        x = norm(json.loads(pa.read_text().replace(la, lb).replace(str(a), str(b)))); y = norm(json.loads(pb.read_text()))
        d = diff(x, y)
        if d: bad.append(f"{rel}: " + "; ".join(d[:4]))
        else: differ_ok += 1
    elif rel.suffix == ".npz":
        za, zb = np.load(pa), np.load(pb)
        ok = sorted(za) == sorted(zb) and all(np.array_equal(za[k], zb[k]) for k in za)
        (bad.append(f"{rel}: arrays differ") if not ok else None); differ_ok += ok
    elif rel.name == "word2vec.model":
        from gensim.models import Word2Vec
        ma, mb = Word2Vec.load(str(pa)), Word2Vec.load(str(pb))
        ok = ma.wv.index_to_key == mb.wv.index_to_key and np.array_equal(ma.wv.vectors, mb.wv.vectors)
        (bad.append(f"{rel}: vectors differ") if not ok else None); differ_ok += ok
    else:
        bad.append(f"{rel}: bytes differ")
extra = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file()
               and not (a / Path(str(p.relative_to(b)).replace(lb, la))).is_file())
print(f"{len(files)} files: {same} byte-identical, {differ_ok} equal once lineage/timings/Lucene ids are masked, "
      f"{len(bad)} different, {len(extra)} only in the new workspace")
for x in bad + [f"only in new: {e}" for e in extra]: print("  ", x)
