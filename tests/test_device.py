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
    ranked, probs = predict(m, ex, books, memories=2, probabilities=True)
    assert sorted(ranked[0]) == [5, 7] and abs(sum(probs[0]) - 1) < 1e-5
