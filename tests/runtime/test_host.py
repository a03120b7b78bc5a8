"""minitorch_dist/runtime/launching/host.py: a rank host forks the ranks (gloo), runs mpiexec and whole sim runs for a launcher in
another process, and everything comes back as plain data (how the autograder keeps student code
out of the process that judges it)."""

import os
import subprocess
import sys
import time

import pytest
import torch

import minitorch_dist.runtime.launching.launch  # noqa: F401  (the module, for its warm pool)

from minitorch_dist import RankError, launch, shutdown
from tests.conftest import ROOT                  # not tools.overlay: students' copies have no tools/

launch_module = sys.modules["minitorch_dist.runtime.launching.launch"]


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A rank host in its own process, and this process's launches pointed at it."""
    yield from start_host(tmp_path, monkeypatch)


def start_host(tmp_path, monkeypatch):
    """The host fixture's body: a rank host started with this process's environment."""
    path = str(tmp_path / "host.sock")
    proc = subprocess.Popen([sys.executable, "-c", f"from minitorch_dist.runtime.launching.host import serve; serve({path!r})"],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    end = time.monotonic() + 120
    while not os.path.exists(path):
        assert proc.poll() is None and time.monotonic() < end, "the rank host did not start"
        time.sleep(0.05)
    shutdown()
    monkeypatch.setenv("MINITORCH_DIST_RANK_HOST", path)
    yield proc
    shutdown()
    proc.kill()
    proc.wait()


def who_am_i(group, k):
    x = torch.full((3,), float(group.rank))
    group.all_reduce(x)
    print(f"hello from {group.rank}")
    return {"x": x, "k": k, "ppid": os.getppid(), "pid": os.getpid()}


def raise_on_one(group):
    if group.rank == 1:
        raise ValueError("boom on rank 1")
    group.barrier()
    return 1


def not_plain(group):
    return object()


@pytest.mark.parametrize("backend", ["gloo", "sim", pytest.param("mpi", marks=pytest.mark.mpi)])
@pytest.mark.slow
def test_the_host_starts_the_ranks_and_results_come_back(host, backend, capfd):
    res = launch(who_am_i, 3, args=(7,), backend=backend)
    assert [r["k"] for r in res] == [7, 7, 7] and all(torch.equal(r["x"], torch.full((3,), 3.0)) for r in res)
    assert res.counters[0].op("all_reduce").calls == 1
    assert all(r["pid"] != os.getpid() for r in res)              # never this process
    if backend == "gloo":
        assert {r["ppid"] for r in res} == {host.pid}             # forked by the host
        assert launch_module._pool.plain
    assert "hello from 2" in capfd.readouterr().out


@pytest.mark.parametrize("backend", ["gloo", "sim"])
def test_a_rank_error_comes_back_with_its_cause_as_plain_data(host, backend):
    with pytest.raises(RankError) as info:
        launch(raise_on_one, 3, backend=backend)
    assert info.value.rank == 1 and info.value.exc_type == "ValueError"
    assert type(info.value.cause) is ValueError and "boom on rank 1" in str(info.value.cause)


@pytest.mark.parametrize("backend", ["gloo", "sim"])
def test_a_return_value_that_is_not_plain_data_is_a_clear_error(host, backend):
    with pytest.raises(RankError, match="not plain data"):
        launch(not_plain, 2, backend=backend)


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (one that exits while /proc is read counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return "Z" not in f.read().split(")")[1][:3]
    except OSError:                                   # FileNotFoundError, or ESRCH while it exits
        return False


def test_the_host_kills_the_ranks_when_the_launcher_lets_go(host):
    pids = [r["pid"] for r in launch(who_am_i, 2, args=(0,))]
    launch_module._pool._procs[0].link.close()        # only the host's link: the pool itself stays
    end = time.monotonic() + 10
    while any(_running(pid) for pid in pids):
        assert time.monotonic() < end, "ranks outlived their pool"
        time.sleep(0.05)
