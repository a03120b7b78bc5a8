"""The memory tracker against counts it does not make, and an instrument that changes nothing it measures.

- Saved activations: the tracker's count (its saved-tensor hooks) equals a walk of the autograd graph
  after forward: every tensor a node holds for backward (`_saved_*`, a custom Function's
  saved_tensors), by storage, less the parameters' storages and 0-dim tensors (a Python number in
  `x * 0.5` is kept as a 0-dim tensor that torch saves without calling saved-tensor hooks: 8 bytes).
- Parameters, gradients and optimizer state: numel x element size summed by hand, per tensor.
- Behaviour: the same forward and backward give bit-for-bit the same loss and gradients with and
  without the tracker; a tensor changed in place after autograd saved it fails backward under the
  tracker (and homework 5's SavedBytes) as it does without it. Torch skips its own version check while
  saved-tensor hooks are active, so the hooks make it (minitorch_dist.memory.SavedTensor).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from assignments.hw5.tests.hw5_memory import SavedBytes
from minitorch_dist.memory import MemoryTracker
from minitorch_dist.models.char_transformer import CharTransformer


def _storage(t: torch.Tensor) -> tuple:
    s = t.untyped_storage()
    return (s.data_ptr(), s.nbytes())


def _tensors(value) -> list:
    return [t for t in (value if isinstance(value, (tuple, list)) else (value,)) if isinstance(t, torch.Tensor)]


def graph_saved_bytes(root, exclude: set) -> int:
    """Bytes of the distinct storages autograd holds for backward below `root` (a grad_fn)."""
    seen, found, stack = set(), {}, [root]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names = [name for name in dir(node) if name.startswith("_saved_")]
        if hasattr(node, "saved_tensors"):             # a custom autograd.Function's ctx.save_for_backward
            names.append("saved_tensors")
        for name in names:
            for t in _tensors(getattr(node, name)):
                if t.dim() > 0 and _storage(t) not in exclude:
                    found[_storage(t)] = t.untyped_storage().nbytes()
        stack += [fn for fn, _ in node.next_functions]
    return sum(found.values())


class Scale(torch.autograd.Function):
    """A custom Function that saves its input and a weight by hand."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0)


class WithCustom(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(12, 12)
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 12))

    def forward(self, x):
        return torch.tanh(Scale.apply(self.lin(x), self.w)).pow(3)


def _models():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 24), nn.GELU(), nn.Linear(24, 24), nn.LayerNorm(24), nn.ReLU(),
                        nn.Linear(24, 5))
    tiny = CharTransformer(vocab_size=11, d_model=16, n_heads=2, n_layers=2, max_len=8, tie_weights=True)
    return {"mlp": (mlp, lambda: mlp(torch.randn(7, 16)).logsumexp(-1).sum()),
            "transformer": (tiny, lambda: tiny(torch.randint(0, 11, (3, 8))).float().pow(2).mean()),
            "custom": (WithCustom(), None)}


@pytest.mark.parametrize("name", ["mlp", "transformer", "custom"])
def test_saved_activations_equal_a_walk_of_the_autograd_graph(name):
    model, loss_fn = _models()[name]
    if loss_fn is None:
        loss_fn = lambda: model(torch.randn(5, 12)).sum()             # noqa: E731
    params = {_storage(p) for p in model.parameters()}
    tracker = MemoryTracker(model)
    with tracker.saved_activations():
        loss = loss_fn()
        counted = tracker.sample("after forward")["activations"]
        walked = graph_saved_bytes(loss.grad_fn, params)
        assert walked > 0 and counted == walked, (counted, walked)
        loss.backward()
    del loss
    assert tracker.sample()["activations"] == 0
    tracker.close()


def test_params_grads_and_optimizer_state_equal_sums_by_hand():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(9, 13), nn.Tanh(), nn.Linear(13, 3)).double()
    model[0].register_buffer("scale", torch.ones(13, dtype=torch.float32))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tracker = MemoryTracker(model, opt)
    model(torch.randn(4, 9, dtype=torch.float64)).sum().backward()
    opt.step()
    got = tracker.sample()
    params = list(model.parameters())
    assert got["params"] == sum(p.numel() * p.element_size() for p in params) + 13 * 4
    assert got["grads"] == sum(p.grad.numel() * p.grad.element_size() for p in params)
    state = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    assert got["optimizer"] == sum(t.numel() * t.element_size() for t in state)


def _step(model, x, measured: str):
    model.zero_grad(set_to_none=True)
    if measured == "tracker":
        tracker = MemoryTracker(model)
        with tracker.saved_activations():
            loss = model(x).pow(2).mean()
            loss.backward()
        tracker.close()
    elif measured == "saved_bytes":
        with SavedBytes():
            loss = model(x).pow(2).mean()
            loss.backward()
    else:
        loss = model(x).pow(2).mean()
        loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("measured", ["tracker", "saved_bytes"])
def test_loss_and_gradients_are_bitwise_the_same_measured_or_not(measured):
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(10, 32), nn.SiLU(), nn.Linear(32, 10), nn.LayerNorm(10))
    x = torch.randn(6, 10) * 30                           # large values: any change in order shows
    bare_loss, bare_grads = _step(model, x, "none")
    loss, grads = _step(model, x, measured)
    assert torch.equal(loss, bare_loss)
    assert all(torch.equal(a, b) for a, b in zip(grads, bare_grads))


class SavesThenChanges(nn.Module):
    """sigmoid saves its output; the module then changes that output in place (a student's bug)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = torch.sigmoid(self.lin(x))
        y.mul_(2)
        return y.sum()


@pytest.mark.parametrize("measured", ["none", "tracker", "saved_bytes"])
def test_a_saved_tensor_changed_in_place_fails_backward_measured_or_not(measured):
    model = SavesThenChanges()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _step(model, torch.randn(3, 4), measured)


def test_a_tensor_changed_in_place_before_autograd_saves_it_is_fine_under_the_tracker():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2))
    loss, grads = _step(model, torch.randn(3, 4), "tracker")
    assert torch.isfinite(loss) and all(g is not None for g in grads)
