"""The sim with a process per rank (sim/processes.py, what gradings run): the same run as the
thread sim, bit for bit (values, simulated time, counters, trace), with the clock, the counters
and the scheduler in the engine only; errors, deadlocks, exits and output come back as on the
thread sim."""

from __future__ import annotations

import errno
import gc
import os
import sys

import cloudpickle
import pytest
import torch

from minitorch_dist.runtime.errors import RankError
from minitorch_dist.runtime.launching import plain
from minitorch_dist.runtime.sim import SimNetwork, run_sim
from minitorch_dist.runtime.sim.processes import run_on_processes
from tests.runtime.exercise import check_exercise, exercise

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks (Linux)")


def _run(fn, p, args=(), network=SimNetwork(), collectives=True, confine=None, own=None):
    """run_on_processes as the rank host's sim process calls it: (reply, what the ranks printed).
    `own`: each rank's own arguments, pickled (meta["own"], as run_sim_on_host sends them)."""
    printed = []
    payload = cloudpickle.dumps((fn, p, tuple(args), {}, {}))
    meta = {"world_size": p, "alpha": network.alpha, "beta": network.beta, "eager_limit": network.eager_limit,
            "collectives": collectives, "trace": True,
            "own": own}
    reply = run_on_processes(payload, tuple(sys.path), meta, printed.append, confine)
    if reply[0] == "encoded result":
        reply = (reply[0], [plain.decode(v) for v in reply[1]], *reply[2:])
    return reply, printed


@pytest.mark.parametrize("p", [1, 3, 4])
def test_every_op_is_the_thread_sims_run(p, no_leftover_processes):
    network = SimNetwork(alpha=2e-5, beta=3e-9, eager_limit=64)       # eager and rendezvous messages
    reply, _ = _run(exercise, p, network=network)
    assert reply[0] == "encoded result", reply
    _, values, counters, events, _, sim_time = reply
    check_exercise(values)
    ref = run_sim(exercise, p, network=network)
    assert sim_time == ref.sim_time
    for mine, theirs in zip(counters, ref.counters):
        assert (mine.messages_sent, mine.bytes_sent, mine.messages_recv, mine.bytes_recv) == \
               (theirs.messages_sent, theirs.bytes_sent, theirs.messages_recv, theirs.bytes_recv)
    assert [(e.rank, e.op, e.peer, e.nbytes, e.start, e.end) for e in events] == \
           [(e.rank, e.op, e.peer, e.nbytes, e.start, e.end) for e in ref.events]


UNIQUE_ALPHA = 3.21e-7        # no other run of the test session uses it


def _look_for_the_clock(group):
    """What a rank can find of its run's scheduler (known by its network's alpha: the test process may
    hold other runs' ones, which the fork copied), and what compute() does to the engine's clock."""
    found = [o for o in gc.get_objects() if type(o).__name__ == "Scheduler" and o.alpha == UNIQUE_ALPHA]
    before = group.now()
    group.compute(0.25)
    print(f"rank {group.rank} looked", flush=True)
    return {"found": len(found), "backend": type(group._backend).__name__, "before": before, "after": group.now()}


def test_the_ranks_hold_no_clock_and_compute_is_counted_by_the_engine():
    reply, printed = _run(_look_for_the_clock, 5, network=SimNetwork(alpha=UNIQUE_ALPHA, beta=0.0))
    assert reply[0] == "encoded result", reply
    _, values, counters, _, _, sim_time = reply
    assert [v["found"] for v in values] == [0] * 5
    assert {v["backend"] for v in values} == {"RemoteBackend"}
    assert [(v["before"], v["after"]) for v in values] == [(0.0, 0.25)] * 5 and sim_time == 0.25
    assert [c.by_op["compute"].calls for c in counters] == [1] * 5
    assert sorted(m[2] for m in printed) == [f"rank {r} looked\n" for r in range(5)]


def _rank_one_fails(group):
    if group.rank == 1:
        raise ValueError("boom on rank 1")
    group.recv(torch.empty(2), 1)


def _both_receive(group):
    group.recv(torch.empty(2), 1 - group.rank)


def _rank_zero_exits(group):
    if group.rank == 0:
        os._exit(3)
    group.recv(torch.empty(2), 0)


def _returns_a_lock(group):
    import threading
    return threading.Lock()


def test_a_failure_a_deadlock_and_an_exit_are_reported_as_on_the_thread_sim(no_leftover_processes):
    reply, _ = _run(_rank_one_fails, 3)
    assert reply[0] == "error" and isinstance(reply[1], RankError), reply
    err, cause = reply[1], plain.decode(reply[2])
    assert (err.rank, err.exc_type, err.message) == (1, "ValueError", "boom on rank 1"), err
    assert isinstance(cause, ValueError) and "_rank_one_fails" in err.remote_traceback
    assert "PeerFailedError" in err.others                       # the others were stopped, not the cause
    reply, _ = _run(_both_receive, 2)
    err = reply[1]
    assert err.exc_type == "DeadlockError", err
    assert "recv(src=1, tag=0) at " in err.message and "test_sim_processes.py" in err.message, err.message
    reply, _ = _run(_rank_zero_exits, 2)
    assert (reply[1].rank, reply[1].exc_type) == (0, "RankExited"), reply[1]
    reply, _ = _run(_returns_a_lock, 2)
    assert reply[1].exc_type == "TypeError" and "could not be sent back" in reply[1].message, reply[1]


def _what_a_rank_reaches(group):
    """Whether this rank can open the engine's memory, whether it is dumpable, its open descriptors."""
    import ctypes
    try:
        with open(f"/proc/{os.getppid()}/mem", "rb"):
            engine = "opened"
    except OSError as exc:
        engine = exc.errno
    return {"engine_mem": engine, "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
            "fds": [int(f) for f in os.listdir("/proc/self/fd")], "link": group._backend.link.conn.fileno()}


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the engine as another uid, as a grading's sandbox does: root")
def test_without_landlock_no_rank_reaches_the_engine_or_its_link():
    """A grading where Landlock is refused (isolation.VAR unset, ENGINE_VAR set): the engine runs in a child
    as an unprivileged uid, made dumpable (as after an exec, or where fs.suid_dumpable is 1) and holding
    a pipe that stands for its link to the launcher. Its ranks must find the engine's memory closed to
    them, be undumpable themselves, and hold no descriptor but their own link to the engine."""
    import ctypes
    import pickle

    from minitorch_dist.runtime.launching import isolation
    from minitorch_dist.runtime.launching.worker import isolate_sim_process
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                             # the engine
        code = 1
        try:
            os.close(r)
            os.environ.pop(isolation.VAR, None)
            os.environ[isolation.ENGINE_VAR] = "1"
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)           # PR_SET_DUMPABLE 1
            reply, _ = _run(_what_a_rank_reaches, 3, confine=lambda fds: isolate_sim_process((w, *fds)))
            os.write(w, pickle.dumps(reply[:2]))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read()
    assert os.waitpid(pid, 0)[1] == 0
    kind, values = pickle.loads(got)
    assert kind == "encoded result", values
    for v in values:
        assert v["engine_mem"] in (errno.EACCES, errno.EPERM), v
        assert v["dumpable"] == 0, v
        others = set(v["fds"]) - {0, 1, 2, v["link"]}
        assert w not in others and len(others) <= 1, v           # at most the listing's own descriptor


def _hunt_the_others_inputs(group, shared, mine):
    """Every marker of a rank's own argument that this rank's Python objects lead to (gc's containers,
    and the bytes and strings in them), besides the argument it was given."""
    import re
    found = set()
    for obj in gc.get_objects():
        items = obj.values() if type(obj) is dict else obj if type(obj) in (list, tuple) else ()
        for item in items:
            if isinstance(item, (bytes, str)):
                text = item.decode("latin-1") if isinstance(item, bytes) else item
                found.update(int(d) for d in re.findall(r"input-of-rank-(\d)", text))
    return {"shared": shared, "mine": mine, "others": sorted(found - {group.rank})}


def test_a_rank_process_holds_its_own_arguments_only():
    """launch's rank_args: rank r's process gets rank_args[r] after the shared args, and none of its
    Python objects leads to another rank's (the message every rank inherited from the engine is
    emptied in each; on the thread sim every rank sees all of them)."""
    pickled = [cloudpickle.dumps((f"input-of-rank-{r}",)) for r in range(4)]     # the plain ones are gone
    reply, _ = _run(_hunt_the_others_inputs, 4, args=("shared",), own=pickled)
    assert reply[0] == "encoded result", reply
    assert reply[1] == [{"shared": "shared", "mine": f"input-of-rank-{r}", "others": []} for r in range(4)]
    from minitorch_dist.runtime.launching.per_rank import appended
    own = [(f"input-of-rank-{r}",) for r in range(4)]
    threads = run_sim(appended(_hunt_the_others_inputs, own), 4, args=("shared",))
    assert [v["others"] for v in threads] == [[q for q in range(4) if q != r] for r in range(4)]
