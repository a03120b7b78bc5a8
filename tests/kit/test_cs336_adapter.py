"""examples/cs336_adapters.py, the thin adapter that runs CS336 assignment 2's distributed tests
against a student's code, checked here the way those tests use it: ranks started by
torch.multiprocessing, init_process_group("gloo"), then the adapter's functions on a model of
CS336's shape (an embedding, norms between layers, linear layers, a frozen parameter), against the
reference (an overlay of solutions/) and one process on the global batch."""

from __future__ import annotations

import sys

import pytest

from tests.kit.conftest import run_in

RANKS = r'''
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch import nn
sys.path.insert(0, "examples")
import cs336_adapters as ad


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb, self.norm1 = nn.Embedding(11, 6), nn.LayerNorm(6)
        self.fc1, self.norm2, self.head = nn.Linear(6, 9), nn.LayerNorm(9), nn.Linear(9, 11)
        self.fixed = nn.Parameter(torch.tensor([2.0]), requires_grad=False)
        with torch.no_grad():
            for q in self.parameters():
                q.copy_(torch.randn(q.shape, generator=g))

    def forward(self, x):
        return self.head(torch.relu(self.norm2(self.fc1(self.norm1(self.emb(x)))))) * self.fixed


def data(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randint(0, 11, (6, 5), generator=g), torch.randint(0, 11, (6, 5), generator=g)


def loss_of(model, x, y):
    return nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())


def train(model, opt, rows, after=None):
    for step in range(2):
        x, y = data(step)
        loss_of(model, x[rows], y[rows]).backward()
        if after: after(model, opt)
        opt.step(); opt.zero_grad()


def rank(r, p, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=r, world_size=p)
    rows = slice(r * 6 // p, (r + 1) * 6 // p)
    one = Toy(); train(one, torch.optim.SGD(one.parameters(), lr=0.1), slice(None))
    want = {n: q.detach() for n, q in one.named_parameters()}
    out = {}
    ddp = ad.get_ddp(Toy())
    train(ddp, torch.optim.SGD(ddp.parameters(), lr=0.1), rows, ad.ddp_on_after_backward)
    out["ddp"] = max((q - want[n]).abs().max().item() for n, q in ddp.module.named_parameters())
    model = Toy()
    train(model, ad.get_sharded_optimizer(model.parameters(), torch.optim.SGD, lr=0.1), rows,
          lambda m, o: [dist.all_reduce(q.grad.div_(p)) for q in m.parameters() if q.grad is not None])
    out["zero"] = max((q - want[n]).abs().max().item() for n, q in model.named_parameters())
    fsdp = ad.get_fsdp(Toy())
    train(fsdp, torch.optim.SGD(fsdp.parameters(), lr=0.1), rows, ad.fsdp_on_after_backward)
    full = ad.fsdp_gather_full_params(fsdp)
    out["fsdp"] = max((full[n] - want[n]).abs().max().item() for n in want)
    out["fsdp_names"] = sorted(full) == sorted(want)
    out["in_module"] = sorted(n for n, _ in fsdp.module.named_parameters())
    dist.destroy_process_group()
    if r == 0:
        print("RESULT", out)


if __name__ == "__main__":
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    mp.spawn(rank, args=(2, port), nprocs=2, join=True)
'''


@pytest.mark.slow
def test_the_cs336_adapter_trains_like_one_process_with_the_reference(reference, tmp_path):
    """DDP, the sharded optimizer and FSDP through the adapter match one process after 2 SGD steps;
    FSDP's norms (in no unit) are replicated and averaged, its full parameters carry every name."""
    script = tmp_path / "cs336_like.py"
    script.write_text(RANKS)
    code, out = run_in(reference, sys.executable, str(script), timeout=300)
    assert code == 0, out[-3000:]
    result = eval(out.split("RESULT", 1)[1].strip().splitlines()[0])           # noqa: S307 - our own print
    assert result["ddp"] < 1e-5 and result["zero"] < 1e-5 and result["fsdp"] < 1e-5, result
    assert result["fsdp_names"], result
    # the sharded weights left their modules; the replicated norms and the frozen parameter stayed
    assert result["in_module"] == ["fixed", "norm1.bias", "norm1.weight", "norm2.bias", "norm2.weight"], result
