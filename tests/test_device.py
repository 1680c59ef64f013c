"""--device: auto picks a GPU only when there is one; a GPU that is not there is a clear error, not a crash later."""
import pytest
import torch

from whoqa.core.device import mixed_precision, resolve_device


def test_devices_resolve_or_say_what_to_use():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="not a device"):
        resolve_device("gpu0")
    with pytest.raises(ValueError, match="only"):
        resolve_device("meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="--device cpu"):
            resolve_device("cuda")
    assert mixed_precision(torch.device("cpu")) == (torch.bfloat16, False)


def test_memory_network_trains_and_answers_on_the_given_device():
    """The memory network's batches, cached memories and predictions follow the model to its device."""
    import numpy as np
    from whoqa.memnet.data import BookArrays, Example
    from whoqa.memnet.model import KVMemNet, MemNetConfig
    from whoqa.memnet.train import fit, predict
    device = resolve_device("auto")
    books = {"b": BookArrays(np.array([[1, 2], [3, 4]]), np.array([[10, 0], [11, 0]]), np.array([10, 11]),
                             np.array([5, 7]), np.array([3, 1]))}
    ex = [Example("b", [1], [0, 1], [5]), Example("b", [3], [1, 0], [7])]
    torch.manual_seed(0)
    m = KVMemNet(torch.randn(20, 8), MemNetConfig(hops=1, salience=True)).to(device)
    losses = fit(m, ex, books, memories=2, epochs=20, lr=0.05, batch_size=2, seed=0)
    assert losses[-1] < losses[0] and m.salience_w.device.type == device.type
    ranked, probs, _scores = predict(m, ex, books, memories=2, probabilities=True)
    assert sorted(ranked[0]) == [5, 7] and abs(sum(probs[0]) - 1) < 1e-5


def test_the_reader_trains_and_answers_on_the_given_device(tiny_reader_path):
    """The FiD reader end to end with a device argument: loaded there, mixed-precision training from cached states
    (kept in host memory), the copy pointer's beam search, all on the reader's device."""
    from whoqa.reader.cache import StateCache, encode_examples, fused_inputs
    from whoqa.reader.config import ReaderConfig
    from whoqa.reader.data import Batcher, ReaderExample
    from whoqa.reader.model import FiDReader
    from whoqa.reader.steps import decoder_start_id
    from whoqa.reader.train import fit, predict
    device = resolve_device("auto")
    torch.manual_seed(0)
    reader = FiDReader.load(tiny_reader_path, device=str(device))
    reader.add_pointer()
    assert reader.device.type == device.type and next(reader.pointer.parameters()).device.type == device.type
    b = Batcher(reader.tokenizer, 40, 8, decoder_start_id(reader))
    ex = [ReaderExample(i, "b", q, [a, a], p) for i, (q, a, p) in enumerate([
        ("who bakes the pie?", "ribby", ["ribby the cat bakes a pie", "duchess eats it"]),
        ("where does jemima go?", "the farm", ["jemima flies away to the farm"])])]
    states = encode_examples(reader, b, ex, progress=False)
    assert all(s.device.type == "cpu" and s.dtype == torch.float16 for s in states)  # host memory, half size
    cache = StateCache.in_memory({e.question_id: s for e, s in zip(ex, states)})
    fused = fused_inputs(reader, b, cache, ex, False)
    assert {t.device.type for t in fused} == {device.type}
    cfg = ReaderConfig(epochs=60, batch_size=2, lr=3e-3, bf16=True, num_beams=2, max_new_tokens=6)
    stats = fit(reader, b, ex, cfg, cache, progress=False)
    assert stats["loss_last"] < stats["loss_first"] / 5
    assert predict(reader, b, ex, cfg, cache, progress=False) == ["ribby", "the farm"]


def test_no_model_code_names_the_cpu_where_it_means_the_models_device():
    """Tensors are made on the model's device; "cpu" appears only in whoqa.core.device and where a file is read into
    host memory on purpose (map_location)."""
    from pathlib import Path
    import re
    root = Path(__file__).resolve().parents[1]
    named = [f"{p.relative_to(root)}:{i}" for p in sorted((root / "whoqa").rglob("*.py")) if p.name != "device.py"
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"""["']cpu["']""", line) and "map_location" not in line]
    assert not named, named


def test_bf16_is_measured_on_the_cpu_and_dropped_where_it_is_slower(monkeypatch, caplog):
    """--bf16 on a CPU whose bfloat16 matmuls are slower than float32 trains in float32, says so and records it (the
    stage's stats name the precision used); where they are faster it stays on. The probe itself is a real measurement: a positive ratio."""
    from whoqa.core import device as dev
    from whoqa.reader import steps
    assert 0 < dev.cpu_bf16_speedup() < float("inf")
    monkeypatch.setattr(dev, "cpu_bf16_speedup", lambda: 0.04)
    with caplog.at_level("WARNING"):
        slow = steps.Precision(torch.device("cpu"), True)
    assert not slow.enabled and slow.name == "float32" and "25x slower than float32" in caplog.text
    monkeypatch.setattr(dev, "cpu_bf16_speedup", lambda: 1.8)
    fast = steps.Precision(torch.device("cpu"), True)
    assert fast.enabled and fast.name == "bfloat16" and not steps.Precision(torch.device("cpu"), False).enabled
