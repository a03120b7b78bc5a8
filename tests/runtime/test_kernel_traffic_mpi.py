"""The kernel's count of mpi runs (observe/run_meter.py with MINITORCH_DIST_KERNEL_TRAFFIC=1): mpiexec's
ranks then talk over TCP (run_meter.MPI_OVER_TCP: no shared memory), honest runs of every op agree
with their counters under MPICH's framing (wire_framing.MPI), and forged counters disagree."""

import sys

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.runtime.observe import kernel_traffic, run_meter
from minitorch_dist.runtime.observe.traffic_check import disagreements
from tests.runtime.test_kernel_traffic import launch_measured
from tests.runtime.test_kernel_traffic_collectives import OPS, claims, collective, on_subgroups

try:
    from tests.runtime.test_mpi import needs_mpirun
except ImportError:                                      # pragma: no cover
    needs_mpirun = pytest.mark.skip(reason="needs mpi4py and mpiexec")

pytestmark = [pytest.mark.mpi, needs_mpirun,
              pytest.mark.skipif(not sys.platform.startswith("linux") or not kernel_traffic.available(),
                                 reason="sock_diag (Linux) is needed to read the kernel's per-socket counts")]


@pytest.fixture
def measured(monkeypatch):
    monkeypatch.setenv(run_meter.VAR, "1")


def every_op(group, n):
    """Messages of every size class (inline header, separate payload), each collective at 0 B, one
    element and n elements, an all_reduce in float16 (reduced as float32: twice its counted bytes)."""
    x, got = torch.ones(n), torch.empty(n)
    right, left = (group.rank + 1) % group.size, (group.rank - 1) % group.size
    group.sendrecv(x, right, got, left)
    group.sendrecv(x[:10], right, got[:10], left)
    handle = group.all_reduce(torch.ones(n), async_op=True)
    handle.wait()
    for op in OPS:
        for numel in (0, 1, n):
            collective(group, op, numel, src=numel)
    group.barrier()
    return 0


def half_all_reduce(group, n):
    group.all_reduce(torch.ones(n, dtype=torch.float16))
    return 0


@pytest.mark.parametrize("p", [2, 3, 4])
def test_honest_mpi_runs_agree_with_the_kernel(monkeypatch, p):
    """Fresh ranks (their connections open during the run), traced and untraced; float32 only with
    widest=1, a float16 all-reduce under the default (4). At p = 2 the ranks first run unmeasured
    (shared memory): the measured launch must restart them over TCP. About 3-6 s each."""
    if p == 2:
        monkeypatch.delenv(run_meter.VAR, raising=False)
        assert launch(every_op, p, args=(10,), backend="mpi").wire is None
    monkeypatch.setenv(run_meter.VAR, "1")
    res = launch(every_op, p, args=(50_000,), backend="mpi", trace=True, fresh=p > 2)
    assert res.wire is not None and all(s > 50_000 and r > 50_000 for s, r in res.wire), res.wire
    assert disagreements(res.counters, res.wire, traced=True, events=res.events, backend="mpi", widest=1) == []
    res = launch(every_op, p, args=(3000,), backend="mpi", trace=False)
    assert disagreements(res.counters, res.wire, backend="mpi", widest=1) == []
    res = launch(half_all_reduce, p, args=(100_000,), backend="mpi", trace=True)
    assert disagreements(res.counters, res.wire, traced=True, events=res.events, backend="mpi") == []
    assert disagreements(res.counters, res.wire, traced=True, events=res.events, backend="mpi", widest=1) != []


def test_mpi_sub_groups_agree(measured):
    res = launch(on_subgroups, 4, args=(100_000,), backend="mpi", trace=True)
    assert disagreements(res.counters, res.wire, traced=True, events=res.events, backend="mpi", widest=1) == []


def reduces_twice(group, n):
    """An all_reduce done twice, the second call taken out of the counters and the trace."""
    x = torch.ones(n)
    group.all_reduce(x)
    group.all_reduce(x.clone())
    count = group.counters.by_op["all_reduce"]
    count.calls, count.tensor_bytes = count.calls - 1, count.tensor_bytes - x.nbytes
    del group.events[-1]
    return 0


@pytest.mark.parametrize("kind,ranks", [("inflated", {0, 1, 2, 3}), ("never", {0, 1, 2, 3}), ("hidden", {0, 1}),
                                        ("compressed", {0, 1, 2, 3}), ("twice", {0, 1, 2, 3})])
def test_forged_mpi_counters_disagree_with_the_kernel(measured, kind, ranks):
    """At p = 4 (the ranks of the tests above; MPICH's all_reduce moves 1.5 n a rank): the forgeries of
    the gloo tests, and an all_reduce done twice with one call counted, which only the bound of a run
    that reduces no widened dtype (widest=1) can tell from one."""
    fn, args = (reduces_twice, (250_000,)) if kind == "twice" else (claims, (kind, 250_000))
    res = launch_measured(fn, 4, args=args, backend="mpi", trace=True)
    problems = disagreements(res.counters, res.wire, traced=True, events=res.events, backend="mpi", widest=1)
    named = {int(line.split()[1].rstrip("'s")) for line in problems if line.startswith("rank ")}
    assert named == ranks, (kind, problems, f"closed during the run: {res.wire.closed} B")
    if kind == "twice":
        assert disagreements(res.counters, res.wire, traced=True, events=res.events, backend="mpi") == []


def test_unmeasured_mpi_runs_keep_shared_memory(monkeypatch):
    """Without the variable (a student's own runs) mpiexec's environment is left alone."""
    monkeypatch.delenv(run_meter.VAR, raising=False)
    assert run_meter.mpi_env() == {} and not run_meter.wanted("mpi")
    monkeypatch.setenv(run_meter.VAR, "1")
    assert run_meter.mpi_env()["MPIR_CVAR_NOLOCAL"] == "1"
