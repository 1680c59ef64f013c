"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2` (gloo on the CPU), and in-process as one
process: the same training step, answers and rankings, saved by the first process to compare."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUESTIONS = [("who bakes the pie?", "ribby", ["ribby the cat bakes a pie", "duchess eats it"]),
             ("where does jemima go?", "to the farm", ["jemima flies away to the farm"]),
             ("what is in the box?", "a small key", ["the box held a small key", "tom opened it"]),
             ("who lost the jacket?", "tom kitten", ["tom kitten lost his blue jacket"]),
             ("what did mrs tabitha do?", "sent them upstairs", ["mrs tabitha sent them upstairs"])]  # 5: uneven shards
SENTENCES = ["sigurd killed the dragon with his sword", "the weather was fine in spring", "bread was baked daily",
             "the king married the queen at midsummer", "the dragon slept on its gold", "sigurd rode north"]


def no_dropout(module: torch.nn.Module) -> None:
    """Dropout draws other masks in other processes: off, so that a step is a deterministic function of the batch."""
    for m in module.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0


def run(reader_path: str, ranker_path: str) -> dict:
    from whoqa.core.distributed import world
    from whoqa.reader.config import ReaderConfig
    from whoqa.reader.data import Batcher, ReaderExample
    from whoqa.reader.model import FiDReader
    from whoqa.reader.steps import decoder_start_id
    from whoqa.reader.train import fit, predict
    from whoqa.retrieval.bert_ranker import CrossEncoder, rank_questions
    from whoqa.retrieval.bm25f import RetrievalConfig
    torch.manual_seed(0)
    reader = FiDReader.load(reader_path, "cpu")
    reader.add_pointer()  # the copy mixture's summed loss too
    no_dropout(reader)
    start = {k: v.detach().clone() for k, v in reader.state_dict().items()}
    batcher = Batcher(reader.tokenizer, 40, 8, decoder_start_id(reader))
    examples = [ReaderExample(i, "b", q, [a, a], p) for i, (q, a, p) in enumerate(QUESTIONS)]
    cfg = ReaderConfig(epochs=2, batch_size=len(examples), lr=1e-3, num_beams=2, max_new_tokens=4,
                       train_encoder=True)  # the whole model, its encoder's unused pooler included
    stats = fit(reader, batcher, examples, cfg, None, progress=False)  # two steps on the whole batch (warm-up: the
    #                                                                     first is taken at learning rate 0)
    out = {"processes": world().size, "loss": stats["loss_first"], "grad_norm": stats["grad_norm_first"], "start": start,
           "weights": {k: v.detach().clone() for k, v in reader.state_dict().items()},
           "answers": predict(reader, batcher, examples, cfg, None, progress=False, batch=2)}
    torch.manual_seed(0)
    ranker = CrossEncoder(ranker_path, device="cpu")
    no_dropout(ranker.model)
    pairs = [(q, s, float(i % 2)) for i, (q, s) in enumerate((q[0], s) for q in QUESTIONS for s in SENTENCES[:3])]
    out["ranker_loss"] = ranker.train(pairs, epochs=2, lr=1e-3, batch_size=len(pairs), seed=0, progress=False)
    out["ranker_weights"] = {k: v.detach().clone() for k, v in ranker.model.state_dict().items()}
    questions = [{"question_id": i, "question": q[0]} for i, q in enumerate(QUESTIONS)]
    ranked = rank_questions(ranker, SENTENCES, questions, lambda q: list(range(len(SENTENCES))),
                            RetrievalConfig(context_sentences=4, window=1))
    out["rankings"] = {q: [list(w) for w in wins] for q, wins in ranked.items()}  # (plain lists: torch.load's safe set)
    return out


if __name__ == "__main__":
    from whoqa.core.distributed import world
    result = run(sys.argv[1], sys.argv[2])
    if world().main:
        torch.save(result, sys.argv[3])
