"""Calibration: the temperature fit, its honest (cross-fitted) judgement, ECE, and training that gives the same numbers
with 1 or 2 threads."""
import subprocess
import sys
from pathlib import Path

import numpy as np

from whoqa.core.calibration import Item, cross_fitted, ece, fit_temperature, probabilities

ROOT = Path(__file__).resolve().parents[1]


def _items(n: int, true_t: float, scale: float, seed: int = 0, groups: int = 5) -> list[Item]:
    """Questions whose right answer is drawn from softmax(logits / true_t), reported with logits x scale: a model
    that is overconfident by `scale` (the right temperature is then true_t * scale)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        logits = rng.normal(0, 2.0, 8)
        right = rng.choice(8, p=probabilities(logits[None], true_t))
        out.append(Item((k,), k % groups, np.arange(8), (logits * scale)[None], np.arange(8) == right))
    return out


def test_the_fit_finds_the_temperature_that_makes_probabilities_true():
    items = _items(3000, 1.0, 3.0)  # scores 3x too sharp
    t = fit_temperature(items)
    assert 2.6 < t < 3.4
    conf = np.array([probabilities(i.scores, 1.0).max() for i in items])
    hit = np.array([i.correct[np.argmax(i.scores[0])] for i in items])
    conf_t = np.array([probabilities(i.scores, t).max() for i in items])
    assert ece(conf, hit) > 0.15 and ece(conf_t, hit) < 0.03  # overconfident before, calibrated after


def test_a_fold_never_lends_its_own_labels_to_its_temperature():
    items = _items(600, 1.0, 2.0, groups=3)
    before = cross_fitted(items)["fold_temperatures"]
    flipped = [Item(i.key, i.group, i.chars, i.scores, np.roll(i.correct, 3)) if i.group == 0 else i for i in items]
    after = cross_fitted(flipped)["fold_temperatures"]
    assert after["0"] == before["0"]  # fold 0's labels changed: its own temperature did not
    assert after["1"] != before["1"] or after["2"] != before["2"]  # the others saw the change


def test_averaging_members_counts_each_member_once():
    a = np.array([[10.0, 0.0, -np.inf], [0.0, 10.0, 0.0]])  # two members, one never scored the third character
    p = probabilities(a, 1.0)
    assert abs(p.sum() - 1) < 1e-9 and abs(p[0] - p[1]) < 1e-4 and p[2] < 1e-4


def test_training_gives_the_same_numbers_with_one_or_two_threads():
    """The memory network trained in a fresh process whose torch was given 1 or 2 intra-op threads (OMP_NUM_THREADS,
    as on machines with other core counts), with batches of varied size (a last batch of 3 is where ATen splits
    reductions by thread): under the thread count the config fixes (whoqa.core.numerics), every parameter is
    bit-identical."""
    script = """
import sys, torch, whoqa
torch.set_num_threads(int(sys.argv[1]))
from whoqa.core.numerics import intra_op_threads
from whoqa.core.seed import set_seed
from whoqa.memnet.config import TrainConfig
from whoqa.memnet.model import KVMemNet, MemNetConfig, nll
with intra_op_threads(TrainConfig().threads):
    set_seed(0)
    m = KVMemNet(torch.randn(3000, 100), MemNetConfig(salience=True))
    opt = torch.optim.Adam(m.parameters(), 1e-2)
    g = torch.Generator().manual_seed(1)
    for B in (32, 32, 3, 7, 32, 1, 5, 64, 200):
        q, k = torch.randint(1, 3000, (B, 10), generator=g), torch.randint(0, 3000, (B, 100, 20), generator=g)
        v, c = torch.randint(0, 3000, (B, 100, 3), generator=g), torch.randint(1, 3000, (B, 60), generator=g)
        ment = (v.unsqueeze(-1) == c[:, None, None, :]).any(2)
        loss = nll(m(q, k, v, c, salience=(ment, torch.randn(B, 60, generator=g))), torch.arange(60) == 0)
        opt.zero_grad(); loss.backward(); opt.step()
print(repr(torch.cat([p.detach().flatten() for p in m.parameters()]).double().sum().item()), repr(loss.item()))
"""
    outs = [subprocess.run([sys.executable, "-c", script, str(n)], capture_output=True, text=True, cwd=ROOT,
                           env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": str(n)}) for n in (1, 2)]
    assert all(o.returncode == 0 for o in outs), outs[0].stderr + outs[1].stderr
    assert outs[0].stdout == outs[1].stdout and outs[0].stdout.strip()
