"""minitorch_dist/runtime/launching/isolation.py: with MINITORCH_DIST_ISOLATE_RANKS=1 (set by the
autograder) each rank runs in a Landlock domain of its own. It can no longer reach a sibling rank's
memory, folder or abstract socket, nor write outside its own folder, nor use System V IPC or UDP, nor
set or read a sibling's rlimits or affinity, and still does everything a rank needs: torch (here and
in a fresh interpreter it starts), gloo collectives over TCP, MPI under mpiexec."""

import ctypes
import errno
import os
import resource
import socket
import subprocess
import sys

import pytest
import torch

from minitorch_dist import RankError, launch, shutdown
from minitorch_dist.runtime.launching import isolation
from tests.runtime.test_mpi import MPIRUN

pytestmark = pytest.mark.skipif(isolation.abi()[0] < 6, reason="needs Landlock ABI 6 (Linux 6.12)")


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _vm_read(pid: int, address: int) -> None:
    """process_vm_readv of 8 bytes at `address` in `pid` (mapped there too: both ranks are forks of one process)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(8)
    local, remote = _Iovec(ctypes.addressof(buf), 8), _Iovec(address, 8)
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) < 0:
        raise OSError(ctypes.get_errno(), "process_vm_readv")


def _sysv_shm() -> None:
    if ctypes.CDLL(None, use_errno=True).shmget(0, 4096, 0o1600) < 0:        # IPC_PRIVATE, IPC_CREAT
        raise OSError(ctypes.get_errno(), "shmget")


def _probe(group, outside: str):
    me, peer = group.rank, 1 - group.rank
    own = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    own.bind(f"\0isolation-test-{os.getppid()}-{me}".encode())
    pids = torch.zeros(2, dtype=torch.int64)
    pids[me] = os.getpid()
    group.all_reduce(pids)                          # gloo, through the measured sockets: still works
    mine = os.environ["TMPDIR"]
    found = {"tmpdir_is_own": mine != outside and os.path.basename(mine).startswith("rank")}
    with open(os.path.join(os.environ["TMPDIR"], "mine"), "w") as f:
        found["own_folder_writable"] = f.write("x") == 1
    attempts = {"sibling_mem": lambda: open(f"/proc/{int(pids[peer])}/mem", "rb"),
                "sibling_status": lambda: open(f"/proc/{int(pids[peer])}/status", "rb"),
                "write_outside": lambda: open(os.path.join(outside, f"leak{me}"), "w"),
                "write_tmp": lambda: open(f"/tmp/isolation-leak-{os.getpid()}", "w"),
                "fifo_in_own": lambda: os.mkfifo(os.path.join(mine, "fifo")),
                "socket_file_in_own": lambda: socket.socket(socket.AF_UNIX).bind(os.path.join(mine, "s")),
                "sibling_vm_readv": lambda: _vm_read(int(pids[peer]), id(sys)),
                "udp_socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
                "sysv_shm": lambda: _sysv_shm(),
                "sibling_prlimit": lambda: resource.prlimit(int(pids[peer]), resource.RLIMIT_CORE),
                "sibling_affinity": lambda: os.sched_getaffinity(int(pids[peer])),
                "sibling_abstract": lambda: own.sendto(b"hi", f"\0isolation-test-{os.getppid()}-{peer}".encode())}
    for name, attempt in attempts.items():
        try:
            attempt()
            found[name] = "allowed"
        except OSError as exc:
            found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
    group.all_reduce(torch.ones(1))                 # both tried before either closes its socket
    resource.setrlimit(resource.RLIMIT_CORE, resource.getrlimit(resource.RLIMIT_CORE))    # its own: allowed
    found["own_attributes"] = bool(os.sched_getaffinity(0)) and os.sched_getaffinity(os.getpid()) == \
        os.sched_getaffinity(0) and resource.prlimit(os.getpid(), resource.RLIMIT_CORE) is not None
    fresh = subprocess.run([sys.executable, "-c", "import torch; print(torch.ones(2).sum().item())"],
                           capture_output=True, text=True, timeout=120)
    found["fresh_torch"] = fresh.stdout.strip() or fresh.stderr[-500:]
    return found


@pytest.mark.slow
def test_a_rank_reaches_nothing_of_its_siblings_and_still_runs(tmp_path, monkeypatch):
    """2 gloo ranks; each also starts a fresh interpreter that imports torch (about 5 s on 2 idle cores)."""
    outside = str(tmp_path)
    monkeypatch.setenv("TMPDIR", outside)
    monkeypatch.setenv(isolation.VAR, "1")
    shutdown()                                       # no warm ranks without the domain
    try:
        found = launch(_probe, 2, args=(outside,), backend="gloo", fresh=True, timeout=180)
    finally:
        shutdown()
    for rank in found:
        assert rank["tmpdir_is_own"] and rank["own_folder_writable"], rank
        for name in ("sibling_mem", "sibling_vm_readv", "sibling_status", "udp_socket", "sysv_shm", "write_outside",
                     "write_tmp", "fifo_in_own", "socket_file_in_own", "sibling_abstract", "sibling_prlimit",
                     "sibling_affinity"):
            assert rank[name] in ("EACCES", "EPERM"), (name, rank)
        assert rank["fresh_torch"] == "2.0" and rank["own_attributes"], rank
    assert not [n for n in os.listdir(outside) if n.startswith("leak")]


def _mpi_rank(group, outside: str):
    x = torch.full((3,), float(group.rank + 1))
    group.all_reduce(x)
    pair = group.subgroup([0, 1]) if group.rank < 2 else None        # communicators made after the narrowing
    if pair is not None:
        pair.all_reduce(x)
    wrote = []
    for path in (os.path.join(outside, f"leak{group.rank}"), f"/dev/shm/leak-{os.getpid()}"):
        try:
            open(path, "w").close()
            wrote.append("allowed")
            os.unlink(path)
        except OSError as exc:
            wrote.append(errno.errorcode.get(exc.errno, str(exc.errno)))
    return x.tolist(), os.environ["TMPDIR"] != outside, wrote


def _mpi_rank_uses_pmi(group, how):
    """MPI_Publish_name (a string any rank of the job could look up, through mpiexec) on rank 1, or
    MPI_Comm_spawn (a process mpiexec starts outside the ranks' domains) from rank 0."""
    import sys

    from mpi4py import MPI
    group.barrier()
    if how == "publish" and group.rank == 1:
        MPI.Publish_name(f"svc-{os.getpid()}", "my input is 42")
    if how == "spawn":
        MPI.COMM_WORLD.Spawn(sys.executable, ["-c", "print('SPAWNED', flush=True)"], 1, root=0)
    return how


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(MPIRUN is None, reason="no mpirun")
def test_mpiexec_ranks_are_isolated_too(tmp_path, monkeypatch):
    """mpiexec's ranks (fresh interpreters: the domain is made first thing in worker._mpi_main) run
    MPI over TCP as in a grading, each in a folder of its own, writing nothing outside it: not even in
    /dev/shm, open to them only until MPI_Init has mapped its segments; communicators made later work."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv(isolation.VAR, "1")
    monkeypatch.setenv("MINITORCH_DIST_KERNEL_TRAFFIC", "1")          # MPI over TCP, as in a grading
    shutdown()
    try:
        found = launch(_mpi_rank, 3, args=(str(tmp_path),), backend="mpi", fresh=True, timeout=180)
    finally:
        shutdown()
    assert found == [([12.0] * 3, True, ["EACCES", "EACCES"])] * 2 + [([6.0] * 3, True, ["EACCES", "EACCES"])], found


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(MPIRUN is None, reason="no mpirun")
def test_an_mpiexec_rank_cannot_use_its_process_manager_link_after_init(monkeypatch):
    """In a grading a rank's PMI link goes through a relay (launching/pmi_relay.py) that, once the world
    communicator is built, passes finalize and abort only: MPI_Publish_name (a channel between ranks
    through mpiexec) and MPI_Comm_spawn fail on their rank with the relay's reason, and the job ends,
    no hang."""
    monkeypatch.setenv(isolation.VAR, "1")
    monkeypatch.setenv("MINITORCH_DIST_KERNEL_TRAFFIC", "1")
    for how, ranks, call in (("publish", [1], "MPI_Publish_name"), ("spawn", [0, 1, 2], "MPI_Comm_spawn")):
        shutdown()
        try:
            with pytest.raises(RankError) as err:
                launch(_mpi_rank_uses_pmi, 3, args=(how,), backend="mpi", fresh=True, timeout=120)
        finally:
            shutdown()
        assert err.value.rank in ranks, err.value           # spawn fails on every rank: the first one told
        assert call in err.value.message, err.value
        assert "link to mpiexec (PMI) carries only MPI_Init, MPI_Finalize and MPI_Abort" in err.value.message, err.value


def test_without_the_variable_nothing_is_isolated(tmp_path, monkeypatch):
    """Students' own runs: no domain, TMPDIR as they set it."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv(isolation.VAR, raising=False)
    assert launch(lambda g: os.environ["TMPDIR"], 2, backend="gloo") == [str(tmp_path)] * 2
