"""The three readers' table (the README's "What a bigger reader buys"): each reader through the same served pipeline,
the reader alone changed (`--llm`), on the readers' check half and on the main job's 10 unseen books.

    python docs/experiments/readers-three/table.py [ROWS_DIR] [--unseen NAME=WS ...]

ROWS_DIR holds readers-<reader>.jsonl.gz (`whoqa eval --questions data_prep/readers/questions.tsv --half check --llm
<reader> --out ...`); each --unseen NAME=WS reads WS/results/served:features@unseen.json and
served-other:features+llm@unseen.json (`whoqa eval --workspace WS --data ws-split/unseen --kinds who|other --llm
<reader>`). Prints a markdown table; a cell with no file is "-"."""
import gzip
import json
import statistics
import sys
from pathlib import Path

READERS = {"135m": "SmolLM2-135M", "0.5b": "Qwen2.5-Coder-0.5B", "1.5b": "Qwen2.5-Coder-1.5B"}
LLM = {"135m": "smollm2-135m", "0.5b": "qwen2.5-coder-0.5b", "1.5b": "qwen2.5-coder-1.5b"}  # (as --llm names them)


def readers_half(path: Path) -> dict:
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    who = [r for r in rows if r["kind"] == "who"]
    other = [r for r in rows if r["kind"] == "other"]
    secs = lambda rs: statistics.median(r["seconds"] for r in rs if r.get("seconds") is not None)  # noqa: E731
    return {"who": len(who), "p@1": 100 * sum(r["rank"] == 1 for r in who) / len(who),
            "p@5": 100 * sum(r["rank"] is not None and r["rank"] <= 5 for r in who) / len(who),
            "other": len(other), "right": 100 * sum(r["right"] for r in other) / len(other),
            "shown": 100 * sum(r.get("shown", False) for r in other) / len(other),
            "who_s": secs(who), "other_s": secs(other)}


def unseen(ws: Path, llm: str) -> dict:
    """The served rows' figures, where the results file is the reader's own (its "model" names it)."""
    out = {}
    who, other = ws / "results" / "served:features@unseen.json", ws / "results" / "served-other:features+llm@unseen.json"
    if who.is_file() and llm in json.loads(who.read_text()).get("model", ""):
        d = json.loads(who.read_text())
        out.update({"u_p@1": d["p@1"], "u_p@5": d["p@5"], "u_who_s": d["seconds_per_question"]})
    if other.is_file() and llm in json.loads(other.read_text()).get("model", ""):
        d = json.loads(other.read_text())
        out.update({"u_rouge": d["text"]["rouge_l"], "u_rouge_shown": d["text_answered"]["rouge_l"],
                    "u_shown": d["answer_coverage"], "u_other_s": d.get("seconds_per_question")})
    return out


def cell(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)


def main(argv: list[str]) -> None:
    rows_dir = Path(argv[0]) if argv and not argv[0].startswith("--") else Path(__file__).parent
    spaces = dict(a.split("=", 1) for a in argv[argv.index("--unseen") + 1:]) if "--unseen" in argv else {}
    print("| reader | check half: Who P@1 / P@5 (40) | other answers right / shown (40) | s per Who / other answer |"
          " unseen books: Who P@1 / P@5 (59) | other ROUGE-L, all / shown (211) | s per Who / other answer |")
    print("|---|---|---|---|---|---|---|")
    for key, name in READERS.items():
        path = rows_dir / f"readers-{key}.jsonl.gz"
        r = readers_half(path) if path.is_file() else {}
        u = unseen(Path(spaces[key]), LLM[key]) if key in spaces else {}
        print(f"| {name} | {cell(r.get('p@1'))} / {cell(r.get('p@5'))} | {cell(r.get('right'))} / {cell(r.get('shown'))}"
              f" | {cell(r.get('who_s'))} / {cell(r.get('other_s'))} | {cell(u.get('u_p@1'))} / {cell(u.get('u_p@5'))}"
              f" | {cell(u.get('u_rouge'))} / {cell(u.get('u_rouge_shown'))} | {cell(u.get('u_who_s'))} / "
              f"{cell(u.get('u_other_s'))} |")


if __name__ == "__main__":
    main(sys.argv[1:])
