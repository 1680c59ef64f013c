"""Several processes (torchrun, gloo on the CPU): a training step on the same global batch gives the same loss and
the same updated weights as one process, for the reader and the BERT ranker; sharded answering and scoring give the
same answers and rankings."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
WORKER = Path(__file__).with_name("distributed_worker.py")


@pytest.fixture(scope="module")
def tiny_ranker_path(tmp_path_factory):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification
    from whoqa.retrieval.bert_ranker import RankerConfig, base_model_path
    path = tmp_path_factory.mktemp("tiny_ranker")
    tok = AutoTokenizer.from_pretrained(base_model_path(RankerConfig()))
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=2, intermediate_size=64, num_labels=1,
                                             max_position_embeddings=128)).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


LAUNCHERS = {"torchrun": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
             "accelerate": [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]}


@pytest.fixture(scope="module")
def alone(tiny_reader_path, tiny_ranker_path):
    """The worker's results in this one process."""
    sys.path.insert(0, str(WORKER.parent))
    from distributed_worker import run
    out = run(tiny_reader_path, tiny_ranker_path)
    assert out["processes"] == 1
    return out


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_two_processes_take_the_steps_and_give_the_answers_of_one(launcher, alone, tiny_reader_path,
                                                                   tiny_ranker_path, tmp_path):
    """Under torchrun and under `accelerate launch` (its multi-GPU launcher starts the same processes; gloo here)."""
    if launcher == "accelerate":
        pytest.importorskip("accelerate")
    out = tmp_path / "two.pt"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(LAUNCHERS[launcher] + [str(WORKER), tiny_reader_path, tiny_ranker_path, str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    two = torch.load(out)
    assert two["processes"] == 2
    assert two["loss"] == pytest.approx(alone["loss"], rel=1e-5)
    assert two["grad_norm"] == pytest.approx(alone["grad_norm"], rel=1e-4)  # the same gradient, not only its sign
    for k, v in alone["weights"].items():  # the same update, parameter by parameter
        assert torch.allclose(two["weights"][k], v, atol=1e-6), k
    assert any(not torch.equal(alone["weights"][k], v) for k, v in alone["start"].items())  # and it moved them
    assert two["answers"] == alone["answers"] and len(two["answers"]) == 5
    assert two["ranker_loss"] == pytest.approx(alone["ranker_loss"], rel=1e-5)  # both steps' losses
    for k, v in alone["ranker_weights"].items():
        assert torch.allclose(two["ranker_weights"][k], v, atol=1e-6), k
    assert two["rankings"].keys() == alone["rankings"].keys() and len(two["rankings"]) == 5
    for q, wins in alone["rankings"].items():  # the same windows in the same order (scores: float rounding apart)
        assert [w[:2] for w in two["rankings"][q]] == [w[:2] for w in wins]
        assert [w[2] for w in two["rankings"][q]] == pytest.approx([w[2] for w in wins], abs=1e-6)


def test_more_processes_than_gpus_is_one_line_before_anything_starts(monkeypatch):
    """`torchrun --nproc_per_node 2 ... --device cuda` on one GPU ended in an NCCL traceback at the first step: now
    one line naming the counts and the fix, before the processes join (where there is no GPU, gloo joins any
    number). Tested on the CPU by telling `world` it has one GPU."""
    import torch.distributed as dist
    from whoqa.core import distributed
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: pytest.fail("joined before the check"))
    with pytest.raises(RuntimeError, match=r"started 2 processes on this machine, which has 1 GPU: .*--nproc_per_node 1"):
        distributed.world()
    distributed.check_gpus(2, 0)  # a CPU-only machine: gloo
    distributed.check_gpus(2, 2)
