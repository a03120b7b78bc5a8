"""The CPU memory tracker: storages counted once, categories, peaks, saved activations, on ranks too."""

import torch
from torch import nn

from minitorch_dist import launch
from minitorch_dist.memory import MemoryTracker, storage_bytes


def test_views_and_tied_weights_count_once():
    base = torch.zeros(100, dtype=torch.float64)
    assert storage_bytes([base, base[:10], base.view(10, 10), None]) == 800
    lin = nn.Linear(4, 4, bias=False).double()
    emb = nn.Embedding(4, 4).double()
    lin.weight = emb.weight
    model = nn.ModuleList([lin, emb])
    assert MemoryTracker(model, hooks=False).sample()["params"] == 16 * 8


def test_grads_optimizer_state_and_resized_storage():
    model = nn.Linear(10, 10).double()                       # 110 parameters
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    tracker = MemoryTracker(model, opt)
    assert tracker.sample() == {"params": 880, "grads": 0, "optimizer": 0, "activations": 0}
    model(torch.randn(3, 10, dtype=torch.float64)).sum().backward()
    opt.step()
    live = tracker.sample()
    assert live["grads"] == 880
    assert 2 * 880 <= live["optimizer"] <= 2 * 880 + 2 * 8   # exp_avg, exp_avg_sq, two step scalars
    model.weight.data.untyped_storage().resize_(0)            # a freed (FSDP-style) storage counts 0
    assert tracker.sample()["params"] == 80
    assert tracker.peak["params"] == 880


def test_saved_activations_rise_in_forward_and_fall_after_backward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh()).double()
    tracker = MemoryTracker(model)
    x = torch.randn(32, 64, dtype=torch.float64)
    with tracker.saved_activations():
        loss = model(x).sum()
        during = tracker.sample()["activations"]
        loss.backward()
    del loss
    assert during >= 3 * 32 * 64 * 8            # x, the first tanh's output, the second tanh's output
    assert tracker.sample()["activations"] == 0
    assert tracker.peak["activations"] == during
    assert tracker.report()["cuda"] is None


def test_checkpointing_cuts_saved_activations():
    from torch.utils.checkpoint import checkpoint
    model = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32),
                                         nn.Tanh()) for _ in range(4)]).double()     # segments of 3 layers
    x = torch.randn(16, 32, dtype=torch.float64, requires_grad=True)
    peaks = []
    for ckpt in (False, True):
        tracker = MemoryTracker(model)
        with tracker.saved_activations():
            y = x
            for layer in model:
                y = checkpoint(layer, y, use_reentrant=False) if ckpt else layer(y)
            y.sum().backward()
        peaks.append(tracker.peak["activations"])
    assert peaks[1] <= 4 * 16 * 32 * 8 < peaks[0] / 2      # only each segment's input stays


def _rank_bytes(group):
    model = nn.Linear(8 * (group.rank + 1), 4).double()
    return MemoryTracker(model, hooks=False).report()["live"]["params"]


def test_per_rank_figures_come_back_from_gloo_ranks():
    assert list(launch(_rank_bytes, 2)) == [(8 * 4 + 4) * 8, (16 * 4 + 4) * 8]
