"""The same exercise of every Group op, judged by the same checker, on every backend.

gloo and sim at world sizes 1-8; mpi through launch(backend="mpi") (ranks started by
mpiexec) at a few sizes here, and at sizes 1, 2, 3, 5, 8 under a real `mpirun` in test_mpi.py.
"""

import shutil
import subprocess
import sys
import os

import pytest

from minitorch_dist import launch, shutdown
from tests.runtime.exercise import check_exercise, exercise

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("backend", ["gloo", "sim"])
def test_every_op(backend, world_size):
    results = launch(exercise, world_size, backend=backend)
    check_exercise(list(results))
    assert results.backend == backend


def _has_mpi() -> bool:
    import importlib.util
    if importlib.util.find_spec("mpi4py") is None:
        return False
    return bool(shutil.which("mpiexec") or os.path.exists(os.path.join(os.path.dirname(sys.executable), "mpiexec")))


@pytest.mark.mpi
@pytest.mark.skipif(not _has_mpi(), reason="needs mpi4py and mpiexec (pip install mpi4py mpich)")
@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.slow
def test_every_op_mpi_pool(world_size):
    try:
        results = launch(exercise, world_size, backend="mpi")
        check_exercise(list(results))
        assert results.backend == "mpi"
    finally:
        shutdown()


def _mismatch_big(group):
    """Rank 0 sends 10000 floats (a payload message, not inline); rank 1's buffer holds 5000."""
    import torch
    if group.rank == 0:
        group.send(torch.arange(10000.0), 1)
    else:
        group.recv(torch.empty(5000), 0)


@pytest.mark.mpi
@pytest.mark.skipif(not _has_mpi(), reason="needs mpi4py and mpiexec (pip install mpi4py mpich)")
def test_mpi_pool_mismatch_larger_than_the_buffer():
    """mpi pre-posts payload receives: a message bigger than the buffer is still a clear error."""
    from minitorch_dist import MessageMismatchError, RankError
    try:
        with pytest.raises(RankError) as info:
            launch(_mismatch_big, 2, backend="mpi")
        assert isinstance(info.value.cause, MessageMismatchError)
        assert "(10000,)" in str(info.value) and "(5000,)" in str(info.value)
    finally:
        shutdown()


# a /tmp of its own, then the run in a fresh interpreter; a kit under /tmp (a CI clone) is bound back
PRIVATE_TMP = """
import os, subprocess, sys
root, python, code = sys.argv[1:]
old = os.open("/tmp", os.O_RDONLY)
subprocess.run(["mount", "-t", "tmpfs", "none", "/tmp"], check=True)
if root.startswith("/tmp/"):
    os.makedirs(root)
    subprocess.run(["mount", "--no-canonicalize", "--bind", "/proc/%d/fd/%d/%s" % (os.getpid(), old, root[5:]), root], check=True)
os.execv(python, [python, "-c", code])
"""
KILLED_MPI_RUN = """
import os, time
from minitorch_dist import LaunchError, launch, shutdown
def stuck(group):
    time.sleep(60)
try:
    launch(stuck, 2, backend="mpi", timeout=3)
    raise AssertionError("the run did not reach its timeout")
except LaunchError as exc:
    assert "timeout" in str(exc), exc
finally:
    shutdown()
print("LEFT", sorted(f for f in os.listdir("/tmp") if f.startswith("hydra_hwloc_xmlfile_")))
"""


@pytest.mark.mpi
@pytest.mark.skipif(not _has_mpi(), reason="needs mpi4py and mpiexec (pip install mpi4py mpich)")
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a private /tmp needs root and unshare")
def test_an_mpi_pool_killed_leaves_no_hydra_file_in_tmp():
    """A run past its timeout kills the pool: mpiexec gets SIGTERM before SIGKILL, so hydra removes the
    topology file it writes in /tmp (SIGKILL alone left one per killed run, hydra_hwloc_xmlfile_*).
    The run has a /tmp of its own (a mount namespace), so other tests' mpi runs do not count."""
    python = os.path.realpath(sys.executable)           # the venv's base interpreter: the venv may be under /tmp
    cmd = ["unshare", "--mount", python, "-c", PRIVATE_TMP, ROOT, sys.executable, KILLED_MPI_RUN]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/", env=dict(os.environ, PYTHONPATH=ROOT))
    assert "LEFT []" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
