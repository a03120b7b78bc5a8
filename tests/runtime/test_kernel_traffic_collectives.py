"""observe/traffic_check.py on runs that use the provided collectives (gloo, real processes): honest
runs of every collective, alone, mixed with point-to-point messages, on sub-groups and on groups of
one rank, agree with the kernel's byte counts; counters that claim collectives that did not happen,
or hide traffic beside them, disagree."""

import os
import shutil
import subprocess
import sys

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.runtime.observe import kernel_traffic, run_meter
from minitorch_dist.runtime.observe.trace import Counters, OpCount
from minitorch_dist.runtime.observe.traffic_check import (collective_framing, disagreements, group_size,
                                                          rank_bounds)
from tests.runtime.test_kernel_traffic import launch_measured

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not kernel_traffic.available(),
                                reason="sock_diag (Linux) is needed to read the kernel's per-socket counts")
OPS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")


@pytest.fixture
def measured(monkeypatch):
    monkeypatch.setenv(run_meter.VAR, "1")


def collective(g, op, numel, dtype=torch.float32, src=0):
    """One call of a provided collective on group g with numel elements of local input per rank."""
    if op == "all_reduce":
        g.all_reduce(torch.ones(numel, dtype=dtype))
    elif op == "reduce_scatter":
        g.reduce_scatter(torch.ones(numel - numel % g.size, dtype=dtype))
    elif op == "all_gather":
        g.all_gather(torch.ones(numel, dtype=dtype))
    else:
        g.broadcast(torch.ones(numel, dtype=dtype), src=src % g.size)


def every_size(group, op):
    """op at 0 B (a barrier), one element, a small message, and the large-message ring; int16 is
    reduced as int32 (twice the counted bytes)."""
    for numel in (0, 1, 3, 1000, 300_000):
        collective(group, op, numel, src=numel)
    collective(group, op, 5000, torch.int16, src=group.size - 1)
    collective(group, op, 777, torch.uint8)
    return 0


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("op", OPS)
def test_every_collective_at_every_size_agrees_with_the_kernel(measured, op, p):
    res = launch(every_size, p, args=(op,), trace=False)
    assert res.wire is not None and all(s > 0 or p == 1 for s, _ in res.wire)
    assert disagreements(res.counters, res.wire) == []
    assert disagreements(res.counters, res.wire, traced=True, events=res.events) == []


def mixed(group, n):
    """Point-to-point messages, collectives of every kind and an async all-reduce in one run."""
    x, got = torch.ones(n), torch.empty(n)
    group.sendrecv(x, (group.rank + 1) % group.size, got, (group.rank - 1) % group.size)
    handle = group.all_reduce(torch.ones(n), async_op=True)
    group.all_gather(torch.ones(n // 4))
    if group.rank == 0:
        group.send(x[:100], 1)
    elif group.rank == 1:
        group.recv(got[:100], 0)
    handle.wait()
    group.broadcast(x, src=1)
    group.reduce_scatter(torch.ones(n * group.size))
    group.barrier()
    return 0


@pytest.mark.parametrize("p,n", [(2, 10), (4, 50_000), (7, 3000)])
def test_point_to_point_and_collectives_in_one_run_agree(measured, p, n):
    res = launch(mixed, p, args=(n,), trace=True)
    assert disagreements(res.counters, res.wire, traced=True, events=res.events) == []


def on_subgroups(group, n):
    """Collectives and a message on sub-groups (their connections close when the run ends, before the
    kernel's second count), and every collective on a group of one rank (no traffic at all)."""
    pair = group.subgroup([r for r in range(group.size) if r // 2 == group.rank // 2])
    pair.all_reduce(torch.ones(n))
    pair.all_gather(torch.ones(n))
    if pair.size > 1:
        pair.sendrecv(torch.ones(n), (pair.rank + 1) % pair.size, torch.empty(n), (pair.rank - 1) % pair.size)
    alone = group.subgroup([group.rank])
    for op in OPS:
        collective(alone, op, n)
    group.all_reduce(torch.ones(10))
    return 0


@pytest.mark.parametrize("p", [2, 5])
def test_sub_groups_and_groups_of_one_rank_agree(measured, p):
    res = launch(on_subgroups, p, args=(100_000,), trace=True)
    assert res.wire.closed >= 100_000 * 2 * (p // 2)        # the sub-groups' traffic, on closed connections
    assert disagreements(res.counters, res.wire, traced=True, events=res.events) == []
    res = launch(on_subgroups, p, args=(100_000,), trace=False)    # untraced: collectives have no lower bound
    assert disagreements(res.counters, res.wire) == []


def claims(group, kind, n):
    """Forged counters: what a submission would report to look like it did something else."""
    if kind == "inflated":                       # a real all_reduce, claimed as 4x its bytes
        group.all_reduce(torch.ones(n))
        group.counters.by_op["all_reduce"].tensor_bytes *= 4
    elif kind == "never":                        # an all_gather that never happened
        group.counters.by_op["all_gather"] = OpCount(calls=1, tensor_bytes=4 * n)
    elif kind == "hidden":                       # extra messages beside an all_reduce, not counted
        group.all_reduce(torch.ones(n))
        if group.rank == 0:
            group.send(torch.ones(8 * n), 1)
        elif group.rank == 1:
            group.recv(torch.empty(8 * n), 0)
        for op in ("send", "recv"):
            group.counters.by_op.pop(op, None)
    elif kind == "compressed":                   # all_gather of the whole tensor, claimed as a tenth
        group.all_gather(torch.ones(n))
        group.counters.by_op["all_gather"].tensor_bytes //= 10
    elif kind == "lone_claim":                   # a claimed world all_reduce with the data moved by hand
        x = torch.ones(n)
        if group.rank == 0:
            for r in range(1, group.size):
                group.send(x, r)
        else:
            group.recv(x, 0)
        group.counters.by_op.clear()
        group.counters.by_op["all_reduce"] = OpCount(calls=1, tensor_bytes=4 * n)
    return 0


@pytest.mark.parametrize("kind,p,ranks", [("inflated", 2, {0, 1}), ("inflated", 4, {0, 1, 2, 3}),
                                          ("never", 3, {0, 1, 2}), ("hidden", 2, {0, 1}),
                                          ("hidden", 4, {0, 1}), ("compressed", 4, {0, 1, 2, 3}),
                                          ("lone_claim", 3, {0, 1, 2})])
def test_forged_collective_counters_disagree_with_the_kernel(measured, kind, p, ranks):
    for traced in (True, False):
        res = launch_measured(claims, p, args=(kind, 250_000), trace=traced)       # claims of 1 MB
        problems = disagreements(res.counters, res.wire, traced=traced, events=res.events if traced else None)
        if not traced and kind in ("inflated", "never", "lone_claim"):
            assert problems == []                # a claim of more: only the traced runs' lower bound sees it
            continue
        named = {int(line.split()[1].rstrip("'s")) for line in problems if line.startswith("rank ")}
        assert named == ranks, (kind, traced, problems, f"closed during the run: {res.wire.closed} B")


def test_a_forgery_hidden_in_a_closed_connection_still_needs_the_bytes(measured):
    """Counters that claim an all_gather are satisfied by bytes on a sub-group's connections (closed
    during the run, not attributed to ranks), but only by as many bytes as actually crossed."""
    res = launch(claims, 2, args=("never", 250_000), trace=True)
    wire = run_meter.Wire(res.wire)
    wire.closed = 2 * 10 ** 6 + 10 ** 4            # what both ranks claim, and a little more
    assert disagreements(res.counters, wire, traced=True, events=res.events) == []
    wire.closed = 10 ** 6 + 10 ** 4                # enough for either rank, not for both
    assert [line[:24] for line in disagreements(res.counters, wire, traced=True, events=res.events)] == \
        ["the ranks' counters say "]
    wire.closed = 0
    assert len(disagreements(res.counters, wire, traced=True, events=res.events)) == 2
    wire.closed = None                           # the kernel's announcements were lost: no lower bound
    assert disagreements(res.counters, wire, traced=True, events=res.events) == []


def test_bounds_of_one_rank():
    """The numbers of the module's notes, for one all_reduce of 1 MiB at p = 4 and a broadcast."""
    c = Counters({"all_reduce": OpCount(calls=1, tensor_bytes=1 << 20)})
    least, most = rank_bounds(c, 4, {})
    assert least == {"sent": (1 << 20) + 64, "received": (1 << 20) + 64, "either": 0}
    assert most["sent"] == pytest.approx(4 * 1.5 * (1 << 20) * (1 + 1 / 256) + collective_framing(4))
    least, _ = rank_bounds(c, 4, None)                           # untraced: no lower bound on collectives
    assert least["sent"] == least["received"] == 0
    least, _ = rank_bounds(c, 4, {"all_reduce": (1, 1 << 20)})  # on a group of one rank: moved nothing
    assert least["sent"] == 0
    least, most = rank_bounds(Counters({"broadcast": OpCount(calls=2, tensor_bytes=1000)}), 8, {})
    assert least == {"sent": 64, "received": 64, "either": 1000}
    assert most["received"] == pytest.approx(7 * 1000 * (1 + 1 / 256) + 2 * collective_framing(8))
    assert [group_size(name, 8) for name in ("world", "group[3]", "group[0, 2, 4]#1")] == [8, 1, 3]


PRIVATE_PROBE = """
import os, sys
sys.path.insert(0, os.getcwd())
from minitorch_dist import launch
from minitorch_dist.runtime.observe.traffic_check import disagreements
from tests.runtime.test_kernel_traffic_collectives import on_subgroups
for traced in (True, False):
    res = launch(on_subgroups, 4, args=(100_000,), trace=traced)
    print(res.wire.closed, res.wire_unseen, disagreements(res.counters, res.wire, traced=traced, events=res.events))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
                    reason="a network namespace of its own needs root, unshare and ip (the grader's zygote has one)")
def test_sub_groups_agree_in_a_private_namespace():
    """As in the grader's zygote (one run at a time in its own namespace): sub-groups' closed
    connections are announced, and the namespace's octet count holds them too."""
    env = dict(os.environ, **{run_meter.VAR: "1", run_meter.PRIVATE_NETNS_VAR: "1"})
    done = subprocess.run(["unshare", "-n", "sh", "-c", f"ip link set lo up && {sys.executable} -c '{PRIVATE_PROBE}'"],
                          capture_output=True, text=True, timeout=120, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    for line in lines:
        closed, unseen, problems = line.split(" ", 2)
        assert int(closed) >= 4 * 400_000 and problems == "[]", done.stdout
