"""The sim's compiled sendrecv (sim/express.cpp) against its Python path: the same results,
counters, clocks, simulated times and errors, program by program.

Each program runs four ways: compiled and Python only (MINITORCH_DIST_SIM_EXPRESS=0), each with
the trace off and on (then the events must be the same too). Every rank returns what it saw
(values, versions, clock) at each step, so a difference anywhere shows, not only in the end
result.
"""

import shutil

import pytest
import torch

from minitorch_dist.runtime.errors import RankError
from minitorch_dist.runtime.sim import SimNetwork, run_sim
from minitorch_dist.runtime.sim import express
from minitorch_dist.runtime.sim.express_build import build

HAS_COMPILER = any(shutil.which(c) for c in ("c++", "g++", "clang++"))


@pytest.fixture(scope="module")
def compiled():
    """The compiled module (built here if this express.cpp was not: ~10 s once per source)."""
    if not HAS_COMPILER:
        pytest.skip("no C++ compiler here: the sim runs its Python path only")
    path, said = build()
    assert path is not None, said
    module = express.load()
    assert module is not None, express.why_not
    return module


def run_each_way(monkeypatch, program, p, *, network=None, args=()):
    """[(values, counters, sim_time)] of the compiled run, the Python run and the compiled traced run,
    whose events are checked against the Python traced run's."""
    out, events = [], []
    for env, trace in (("1", False), ("0", False), ("1", True), ("0", True)):
        monkeypatch.setenv("MINITORCH_DIST_SIM_EXPRESS", env)
        res = run_sim(program, p, args=args, trace=trace, collectives=False, network=network or SimNetwork())
        counts = [{op: (c.calls, c.messages_sent, c.bytes_sent, c.messages_recv, c.bytes_recv)
                   for op, c in sorted(cs.by_op.items())} for cs in res.counters]
        out.append((list(res), counts, res.sim_time))
        if trace:
            events.append([(e.rank, e.op, e.peer, e.tag, e.nbytes, e.start, e.end, e.group) for e in res.events])
    assert events[0] == events[1] and len(events[0]) > p
    assert out[2] == out[3]
    return out[:3]


def uneven_ring(group, n, dtype):
    """A ring all-reduce of n elements (n not a multiple of p: chunks differ), every step's values,
    the receive buffer's version and the clock recorded."""
    p, r = group.size, group.rank
    x = (torch.arange(n, dtype=torch.float64) * (r + 1) + r / 7).to(dtype)
    bounds = [(i * n // p, (i + 1) * n // p) for i in range(p)]
    seen = []
    for step in range(p - 1):
        s0, s1 = bounds[(r - step) % p]
        d0, d1 = bounds[(r - step - 1) % p]
        got = torch.empty(d1 - d0, dtype=dtype)
        group.sendrecv(x[s0:s1], (r + 1) % p, got, (r - 1) % p)
        x[d0:d1] += got
        seen.append((got.tolist(), got._version, group.now()))
    for step in range(p - 1):
        s0, s1 = bounds[(r - step + 1) % p]
        d0, d1 = bounds[(r - step) % p]
        group.sendrecv(x[s0:s1], (r + 1) % p, x[d0:d1], (r - 1) % p, 3)
        seen.append((x.tolist(), x._version, group.now()))
    return seen


def sendrecv_type(group):
    return type(group.sendrecv).__name__, type(group.subgroup([0, 1]).sendrecv).__name__ if group.rank < 2 else None


@pytest.mark.parametrize("p,n,dtype", [(5, 23, torch.float32), (8, 8, torch.float64), (3, 1000, torch.int32),
                                       (6, 17, torch.bfloat16), (4, 9, torch.bool)])
def test_a_ring_gives_the_same_steps_compiled_and_in_python(monkeypatch, compiled, p, n, dtype):
    fast, python, traced = run_each_way(monkeypatch, uneven_ring, p, args=(n, dtype))
    assert fast[0] == python[0] == traced[0]
    assert fast[1] == python[1] == traced[1]
    assert fast[2] == python[2] == traced[2] and fast[2] > 0


def mixed(group):
    """Calls the compiled object must pass on: keywords, tags, sub-groups, rendezvous, posted
    receives, non-contiguous and grad buffers, other ops between."""
    p, r = group.size, group.rank
    right, left = (r + 1) % p, (r - 1) % p
    log = []
    a = torch.full((2, 3), float(r))
    b = torch.empty(2, 3)
    group.sendrecv(a, right, b, left)                              # plain
    group.sendrecv(a, dst=right, recv_tensor=b, src=left)          # keywords
    log.append(b.tolist())
    t = torch.empty(3, 2).t()                                      # non-contiguous receive buffer
    group.sendrecv(a + 1, right, t, left, 7)
    log.append(t.tolist())
    g = torch.zeros(6, requires_grad=True)                         # a buffer that requires grad
    group.sendrecv(torch.arange(6.0) * r, right, g, left)
    log.append((g.tolist(), g._version))
    big = torch.full((50,), float(r))                              # rendezvous under eager_limit=100
    bigger = torch.empty(50)
    group.sendrecv(big, right, bigger, left)
    log.append(bigger.tolist())
    if r % 2 == 0:                                                 # the receive posted before the send
        req = group.irecv(torch.empty(4), left, tag=2)
        group.send(torch.full((4,), float(r)), right, tag=2)
        log.append(req.wait().tolist() if hasattr(req.wait(), "tolist") else None)
    else:
        got = torch.empty(4)
        group.recv(got, left, tag=2)
        group.send(torch.full((4,), float(r)), right, tag=2)
        log.append(got.tolist())
    sub = group.subgroup([q for q in range(p) if q % 2 == r % 2])
    if sub.size > 1:
        x = torch.full((3,), float(r))
        y = torch.empty(3)
        for _ in range(sub.size):
            sub.sendrecv(x, (sub.rank + 1) % sub.size, y, (sub.rank - 1) % sub.size)
            x = y.clone()
        log.append(y.tolist())
    for _ in range(70):                                             # past MAX_IN_FLIGHT: yields
        group.sendrecv(torch.full((1,), float(r)), right, torch.empty(1), left, 1)
    log.append(group.now())
    return log


def test_the_compiled_sendrecv_is_bound_unless_switched_off(monkeypatch, compiled):
    monkeypatch.setenv("MINITORCH_DIST_SIM_EXPRESS", "1")
    assert list(run_sim(sendrecv_type, 3, collectives=False)) == [("Express", "Express")] * 2 + [("Express", None)]
    monkeypatch.setenv("MINITORCH_DIST_SIM_EXPRESS", "0")
    assert list(run_sim(sendrecv_type, 3, collectives=False)) == [("method", "method")] * 2 + [("method", None)]


@pytest.mark.parametrize("eager_limit", [None, 100, 0])
def test_mixed_calls_give_the_same_results_compiled_and_in_python(monkeypatch, compiled, eager_limit):
    net = SimNetwork(alpha=2e-6, beta=3e-9, eager_limit=eager_limit)
    fast, python, traced = run_each_way(monkeypatch, mixed, 6, network=net)
    assert fast == python == traced


def mismatched(group):
    r = group.rank
    other = 1 - r
    group.sendrecv(torch.ones(4), other, torch.empty(4), other)
    group.sendrecv(torch.ones(4), other, torch.empty(4 if r == 0 else 5), other)   # shape mismatch on rank 1


def into_inference_tensor(group):
    with torch.inference_mode():
        inference = torch.empty(2)
    group.sendrecv(torch.ones(2), 1 - group.rank, inference, 1 - group.rank)


def bad_arguments(group):
    group.sendrecv(torch.ones(2), True, torch.empty(2), 0)


@pytest.mark.parametrize("program", [mismatched, into_inference_tensor, bad_arguments])
def test_errors_are_the_same_compiled_and_in_python(monkeypatch, compiled, program):
    texts = []
    for env in ("1", "0"):
        monkeypatch.setenv("MINITORCH_DIST_SIM_EXPRESS", env)
        with pytest.raises(RankError) as info:
            run_sim(program, 2, trace=False, collectives=False)
        texts.append(str(info.value))
    assert texts[0] == texts[1]


def test_a_subclass_of_group_keeps_its_own_sendrecv(compiled):
    from minitorch_dist.runtime.group import Group
    from minitorch_dist.runtime.sim.network import SimBackend
    from minitorch_dist.runtime.sim.scheduler import Scheduler

    class Mine(Group):
        def sendrecv(self, *args, **kwargs):
            return "mine"

    sched = Scheduler(2, SimNetwork())
    backend = SimBackend(sched, 0, (0, 1), "world")
    assert express.bind(backend, Mine.__new__(Mine)) is None


def odd_arguments(group):
    """Arguments the compiled object must hand to the Python method, which raises its own errors."""
    seen = []
    for args in [(torch.ones(2), 2 ** 70, torch.empty(2), 0), (torch.ones(2), 1.0, torch.empty(2), 0),
                 ("x", 1, torch.empty(2), 1), (torch.ones(2), 1 - group.rank, torch.empty(2), 1 - group.rank, -1)]:
        try:
            group.sendrecv(*args)
            seen.append("ok")
        except (TypeError, ValueError) as exc:
            seen.append(f"{type(exc).__name__}: {exc}")
    return seen


def test_odd_arguments_get_the_python_methods_errors(monkeypatch, compiled):
    got = []
    for env in ("1", "0"):
        monkeypatch.setenv("MINITORCH_DIST_SIM_EXPRESS", env)
        got.append(list(run_sim(odd_arguments, 2, trace=False, collectives=False)))
    assert got[0] == got[1] and all(s != "ok" for s in got[0][0]), got


def test_without_a_build_the_sim_runs_its_python_path(monkeypatch, tmp_path):
    monkeypatch.setenv("MINITORCH_DIST_EXT_DIR", str(tmp_path))       # an empty folder: no build there
    monkeypatch.setattr(express, "_loaded", [])
    assert express.load() is None and "not built" in express.why_not
    assert list(run_sim(sendrecv_type, 2, collectives=False)) == [("method", "method")] * 2
    assert list(run_sim(uneven_ring, 3, args=(7, torch.float32), trace=False, collectives=False))


def test_a_build_without_a_working_compiler_says_so_and_builds_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("MINITORCH_DIST_EXT_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "false")                                # a compiler that always fails
    path, said = build()
    assert path is None and "failed" in said
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    path, said = build()
    assert path is None and "no C++ compiler" in said, said
    assert not any(p.suffix in (".so", ".pyd") for p in tmp_path.rglob("*"))


def odd_tensor(group, kind, side):
    """A sparse or nested tensor where sendrecv expects a plain one, with the peer's message already
    waiting (so the compiled object inspects it: its getters would throw for these)."""
    odd = torch.zeros(2).to_sparse() if kind == "sparse" else torch.nested.nested_tensor([torch.zeros(2)])
    if group.rank == 1:
        group.send(torch.ones(2), 0)                        # waits in rank 0's inbox
        group.send(torch.ones(1), 0, tag=5)                 # wakes rank 0
        group.recv(torch.empty(2), 0)
        return "ok"
    group.recv(torch.empty(1), 1, tag=5)
    if side == "recv":
        group.sendrecv(torch.ones(2), 1, odd, 1)
    else:
        group.sendrecv(odd, 1, torch.empty(2), 1)
    return "ok"


@pytest.mark.parametrize("kind", ["sparse", "nested"])
@pytest.mark.parametrize("side", ["recv", "send"])
def test_sparse_and_nested_tensors_get_the_python_paths_answer(monkeypatch, compiled, kind, side):
    outcomes = []
    for env in ("1", "0"):
        monkeypatch.setenv("MINITORCH_DIST_SIM_EXPRESS", env)
        try:
            outcomes.append(list(run_sim(odd_tensor, 2, args=(kind, side), trace=False, collectives=False)))
        except RankError as exc:
            outcomes.append(str(exc).split("--- traceback")[0])
    assert outcomes[0] == outcomes[1]
