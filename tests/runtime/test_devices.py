"""Devices: group.device, backend="nccl" and device="cuda".

The tests marked gpu run only where torch sees a CUDA GPU (pytest -m gpu); elsewhere they skip
with the reason. The others run everywhere: they check what a machine without a GPU says.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist import DeadlockError, LaunchError, RankError, launch
from minitorch_dist.runtime.devices import no_gpu_reason

NO_GPU = no_gpu_reason()


def _where(group):
    return str(group.device)


@pytest.mark.parametrize("backend", ["gloo", "sim"])
def test_group_device_is_the_cpu_by_default(backend):
    assert list(launch(_where, 2, backend=backend)) == ["cpu", "cpu"]


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU")
def test_nccl_without_a_gpu_says_why_and_what_to_use_instead():
    with pytest.raises(LaunchError, match=r"backend='nccl'.*Use backend='gloo'"):
        launch(_where, 2, backend="nccl")


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU")
def test_device_cuda_without_a_gpu_says_why():
    with pytest.raises(LaunchError, match=r"device='cuda'.*device='cpu'"):
        launch(_where, 2, device="cuda")


def test_the_simulator_refuses_a_gpu_device():
    with pytest.raises(LaunchError, match="simulator runs on the CPU"):
        launch(_where, 2, backend="sim", device="cuda")


# -- on a GPU -------------------------------------------------------------------------------------
def _every_op(group):
    """Point-to-point and each provided collective on the rank's device; returns values and counts."""
    dev, r, p = group.device, group.rank, group.size
    out = {"device": str(dev)}
    x = torch.arange(6, dtype=torch.float32, device=dev) + r
    y = torch.empty_like(x)
    group.sendrecv(x, (r + 1) % p, y, (r - 1) % p)
    out["sendrecv"] = y.cpu()
    s = x.clone()
    group.all_reduce(s)
    out["all_reduce"] = s.cpu()
    g = group.all_gather(x)
    out["all_gather"] = g.cpu()
    n = 6 // p if 6 % p == 0 else 3
    rs = group.reduce_scatter(torch.arange(n * p, dtype=torch.float32, device=dev) * (r + 1))
    out["reduce_scatter"] = rs.cpu()
    b = x.clone() if r == 0 else torch.zeros(6, device=dev)
    handle = group.broadcast(b, 0, async_op=True)
    handle.wait()
    out["broadcast"] = b.cpu()             # wait() means the data is there: read right after it
    out["on_device"] = all(t.device == dev for t in (y, s, g, rs, b))
    return out


def _expected(p: int) -> dict:
    x = [torch.arange(6, dtype=torch.float32) + r for r in range(p)]
    n = 6 // p if 6 % p == 0 else 3
    return {"all_reduce": sum(x), "all_gather": torch.cat(x),
            "reduce_scatter": [sum(torch.arange(n * p, dtype=torch.float32)[i * n:(i + 1) * n] * (q + 1)
                                   for q in range(p)) for i in range(p)]}


def _check(res, p: int, device: str = "cuda"):
    want = _expected(p)
    for r, out in enumerate(res):
        assert out["on_device"] and out["device"].startswith(device)
        assert torch.equal(out["sendrecv"], torch.arange(6, dtype=torch.float32) + (r - 1) % p)
        assert torch.equal(out["all_reduce"], want["all_reduce"])
        assert torch.equal(out["all_gather"], want["all_gather"])
        assert torch.equal(out["reduce_scatter"], want["reduce_scatter"][r])
        assert torch.equal(out["broadcast"], torch.arange(6, dtype=torch.float32))


class _Work:
    def __init__(self, done: bool):
        self.done = done

    def is_completed(self) -> bool:
        return self.done


class _Communicator:
    def __init__(self):
        self.calls = []

    def shutdown(self):
        self.calls.append("shutdown")

    def abort(self):
        self.calls.append("abort")


def test_closing_nccl_aborts_a_collective_still_running_and_shuts_down_otherwise():
    """torch's shutdown() waits for the GPU's kernels: after a deadlock it would never return."""
    from minitorch_dist.runtime.transports.nccl import close_communicator
    pg = _Communicator()
    assert close_communicator(pg, []) == "shutdown"
    assert close_communicator(pg, [_Work(True), _Work(False)]) == "abort"
    assert close_communicator(pg, [_Work(True)]) == "shutdown"
    assert pg.calls == ["shutdown", "abort", "shutdown"]


@pytest.mark.parametrize("p", [1, 2, 3])
def test_the_gpu_tests_expectations_hold_on_the_cpu(p):
    """The same rank code and checks as the GPU tests below, on gloo: the expectations are right."""
    _check(launch(_every_op, p, backend="gloo"), p, device="cpu")


@pytest.mark.gpu
def test_nccl_runs_every_op_on_the_gpu_and_counts_as_gloo_does():
    p = min(2, torch.cuda.device_count())
    res = launch(_every_op, p, backend="nccl")
    _check(res, p)
    cpu = launch(_every_op, p, backend="gloo")
    assert [c.by_op.keys() for c in res.counters] == [c.by_op.keys() for c in cpu.counters]
    for a, b in zip(res.counters, cpu.counters):
        assert {k: (v.calls, v.bytes_sent) for k, v in a.by_op.items()} == \
               {k: (v.calls, v.bytes_sent) for k, v in b.by_op.items()}


@pytest.mark.gpu
def test_gloo_with_device_cuda_keeps_tensors_on_the_gpu():
    res = launch(_every_op, 2, backend="gloo", device="cuda")      # two ranks may share one GPU
    _check(res, 2)


def _stuck_collective(group):
    if group.rank == 0:
        group.all_reduce(torch.ones(4, device=group.device))
    else:
        group.recv(torch.empty(4, device=group.device), 0)


@pytest.mark.gpu
def test_a_stuck_nccl_collective_ends_in_the_deadlock_report():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    with pytest.raises((DeadlockError, RankError), match="deadlock"):
        launch(_stuck_collective, 2, backend="nccl", deadline=5, fresh=True)
