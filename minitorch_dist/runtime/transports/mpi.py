"""The mpi backend: Group messages over mpi4py, for programs started by mpirun/mpiexec.

    mpirun -n 4 python train.py      # in train.py: launch(main, 4) runs this rank's part
    launch(main, 4, backend="mpi")   # or from a notebook: ranks started by mpiexec

Point-to-point (mpi_p2p): each message's header (with a payload up to 64 KiB) goes on a
communicator of its own straight to its posted receive, which the waiting rank thread
checks itself; larger payloads follow on the group's data communicator, handed to MPI
without a copy; a progress thread drives MPI while rank code does not. Provided
collectives: MPI's non-blocking ones (Iallreduce, Iallgather, Ireduce_scatter_block,
Ibcast, Ibarrier); dtypes MPI cannot reduce (float16, bfloat16, float8, bool) are
reduced in a float32/uint8 copy.

MPI_Wait has no timeout, so rank code polls its requests: it spins for _SPIN_S (a
message in flight completes at full speed), then naps with a backoff capped at 1 ms,
and honours the run's deadline; on expiry the Group builds the deadlock report from
the states every rank publishes to the job's TCPStore. Only one thread of a rank is
in MPI at a time when it matters (see mpi_progress.Progress): two slow each other down.

MPI here is not CUDA-aware: CUDA tensors travel through host copies. mpi4py.MPI is
imported on first use, so importing this module does not initialise MPI.
"""

from __future__ import annotations

import atexit
import os
import zlib

import torch

from ..backend import Backend, DeadlineExpired, DoneWork, Work
from ..devices import rank_device
from ..env import mpi_rank_and_size
from . import wire
from .mpi_p2p import DirectP2P
from .mpi_progress import Progress, _host, _mpi, _raw, _RequestWork, _wait_request


def unlink_shm_segments() -> list[str]:
    """Unlink the shared-memory segments MPICH's init made for this node's ranks (/dev/shm/mpich_shm_*,
    as this process maps them), once every rank has mapped them: the memory stays for as long as a
    rank maps it, but MPICH itself unlinks them only in MPI_Finalize, so a job that fails (a rank
    raising aborts the job) left about 2 MB in /dev/shm each time. Returns the names unlinked here."""
    gone = []
    try:
        with open("/proc/self/maps") as f:
            fields = [line.split(None, 5) for line in f]          # address perms offset dev inode [path]
    except OSError:                    # not Linux
        return gone
    paths = {f[5].strip() for f in fields if len(f) == 6}
    for path in sorted(p for p in paths if p.startswith("/dev/shm/mpich_shm_")):
        try:
            os.unlink(path)
            gone.append(path)
        except OSError:                # another rank of the node was first
            pass
    return gone


def running_under_mpirun() -> bool:
    """True when this process was started by mpirun/mpiexec (Open MPI, MPICH, PMIx variables)."""
    return mpi_rank_and_size() is not None


_MPI_TYPES = {  # torch dtype -> MPI datatype, for reductions (moving data uses MPI.BYTE)
    "float32": "FLOAT", "float64": "DOUBLE", "int8": "INT8_T", "uint8": "UINT8_T",
    "int16": "INT16_T", "int32": "INT32_T", "int64": "INT64_T", "uint16": "UINT16_T",
    "uint32": "UINT32_T", "uint64": "UINT64_T", "complex64": "C_FLOAT_COMPLEX",
    "complex128": "C_DOUBLE_COMPLEX"}
_MPI_TYPES = {getattr(torch, k): v for k, v in _MPI_TYPES.items() if hasattr(torch, k)}
# dtypes MPI cannot reduce go through a wider copy, exact for every value they hold
_WIDEN = {getattr(torch, k): torch.float32 for k in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
          if hasattr(torch, k)}
_WIDEN[torch.bool] = torch.uint8
_MPI_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN"}
_BOOL_OPS = {"sum": "max", "prod": "min", "max": "max", "min": "min"}  # or, and, or, and
_live: set = set()   # backends whose progress thread may still run: stopped at exit, before MPI_Finalize
_unsent: list = []   # buffers of sends no receive took before their group closed (MPI may read them)


class MpiBackend(Backend):
    """Backend over (duplicates of) an mpi4py communicator. Ranks are ranks of `comm`.

    `world_ranks`: world rank of each comm rank (default: translated via COMM_WORLD).
    Creating one is collective over `comm`, and so is close().
    """

    name = "mpi"

    @classmethod
    def world(cls, store, rank: int, size: int, key: str, device=None) -> "MpiBackend":
        """The job's MPI_COMM_WORLD (mpiexec started the ranks; the store is not needed)."""
        world = cls(_mpi().COMM_WORLD)
        unlink_shm_segments()          # every rank is past MPI_Init now: its Dup above is collective
        world.device = rank_device(device, world.rank)
        return world

    def __init__(self, comm, world_ranks: tuple[int, ...] | None = None, _adopt: bool = False):
        MPI = _mpi()
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise RuntimeError("mpi backend: MPI was initialised without MPI_THREAD_MULTIPLE; the "
                               "progress thread needs it. Do not lower mpi4py.rc.thread_level.")
        self._MPI = MPI
        self._comm = comm if _adopt else comm.Dup()   # payloads and collectives
        self._idle = self._comm.Dup()                 # the progress thread's receive, never filled
        self._head = self._comm.Dup()                 # Group messages' headers (mpi_p2p)
        self.rank, self.size = self._comm.Get_rank(), self._comm.Get_size()
        if world_ranks is None:
            world_ranks = MPI.Group.Translate_ranks(comm.Get_group(), list(range(self.size)),
                                                    MPI.COMM_WORLD.Get_group())
        self.world_ranks = tuple(world_ranks)
        # MPI keeps messages with equal (source, tag) in order, so folding sequence numbers
        # into the bits MPI's tags have left loses nothing.
        self._tag_ub = self._comm.Get_attr(MPI.TAG_UB)
        seq_bits = min(self._tag_ub.bit_length() - wire.TAG_BITS, wire.SEQ_BITS)
        if seq_bits < 1:
            raise RuntimeError(f"mpi backend: this MPI's largest tag is {self._tag_ub}, too small for "
                               f"{wire.TAG_BITS}-bit user tags; use the gloo backend")
        self._progress = Progress(self._idle, self.rank) if self.size > 1 else None
        defer = self._progress.defer if self._progress is not None else _no_progress
        self._p2p = DirectP2P(self._head, self._comm, self.rank, seq_bits, self._name_rank, defer)
        if not _live:
            atexit.register(_stop_threads)
        _live.add(self)

    def _name_rank(self, r: int) -> str:
        w = self.world_ranks[r]
        return f"rank {r}" if w == r else f"rank {r} (world rank {w})"

    def _work(self, req, keep, finish=None) -> Work:
        return _RequestWork(self, req, keep, finish)

    # -- point to point: straight to the receive (mpi_p2p) ---------------------------------------
    def isend(self, tensor: torch.Tensor, dst: int, tag: int, op: str) -> Work:
        return self._p2p.isend(tensor, dst, tag, op)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int, op: str) -> Work:
        return self._p2p.irecv(tensor, src, tag, op)

    # -- collectives ----------------------------------------------------------------------------
    def _reduce_setup(self, dtype: torch.dtype, op: str, call: str):
        """(dtype MPI reduces in, MPI datatype, MPI op) for reducing `dtype` with `op`."""
        wide = _WIDEN.get(dtype, dtype)
        if wide not in _MPI_TYPES:
            raise TypeError(f"{call} on rank {self.rank} (mpi backend): dtype {dtype} cannot be "
                            f"reduced; cast to float32 or int64 first")
        if dtype.is_complex and op in ("max", "min"):
            raise TypeError(f"{call} on rank {self.rank}: op={op!r} is not defined for complex "
                            f"dtype {dtype}; use sum or prod, or reduce the real part")
        op = _BOOL_OPS[op] if dtype == torch.bool else op
        return wide, getattr(self._MPI, _MPI_TYPES[wide]), getattr(self._MPI, _MPI_OPS[op])

    def all_reduce(self, tensor: torch.Tensor, op: str) -> Work:
        """In place, via MPI Iallreduce. Cost (MPICH, large n): ~2 log p alpha + 2 n s beta."""
        wide, mpi_type, mpi_op = self._reduce_setup(tensor.dtype, op, "all_reduce")
        if tensor.numel() == 0:
            return DoneWork()
        host = _host(tensor, wide)
        req = self._comm.Iallreduce(self._MPI.IN_PLACE, [host.detach().numpy(), mpi_type], mpi_op)
        return self._work(req, (tensor, host), None if host is tensor else (lambda: tensor.copy_(host)))

    def all_gather(self, out: torch.Tensor, tensor: torch.Tensor) -> Work:
        """out (p*m, ...) <- every rank's tensor (m, ...), as bytes via MPI Iallgather."""
        if out.numel() == 0:
            return DoneWork()
        host_in, host_out = _host(tensor), _host(out, copy=False)
        req = self._comm.Iallgather(_raw(host_in), _raw(host_out))
        finish = None if host_out is out else (lambda: out.copy_(host_out))
        return self._work(req, (tensor, out, host_in, host_out), finish)

    def reduce_scatter(self, out: torch.Tensor, tensor: torch.Tensor, op: str) -> Work:
        """out (m, ...) <- reduction of rows [r*m, (r+1)*m), via MPI Ireduce_scatter_block."""
        wide, mpi_type, mpi_op = self._reduce_setup(tensor.dtype, op, "reduce_scatter")
        if tensor.numel() == 0:
            return DoneWork()
        host_in, host_out = _host(tensor, wide), _host(out, wide, copy=False)
        req = self._comm.Ireduce_scatter_block([host_in.detach().numpy(), mpi_type],
                                               [host_out.numpy(), mpi_type], mpi_op)
        finish = None if host_out is out else (lambda: out.copy_(host_out))
        return self._work(req, (tensor, out, host_in, host_out), finish)

    def broadcast(self, tensor: torch.Tensor, src: int) -> Work:
        """In place: every rank gets group rank `src`'s tensor, as bytes via MPI Ibcast."""
        if tensor.numel() == 0:
            return DoneWork()
        host = _host(tensor, copy=self.rank == src)
        req = self._comm.Ibcast(_raw(host), root=src)
        return self._work(req, (tensor, host), None if host is tensor else (lambda: tensor.copy_(host)))

    def barrier(self) -> Work:
        return self._work(self._comm.Ibarrier(), None)

    # -- groups ---------------------------------------------------------------------------------
    def subgroup(self, ranks: tuple[int, ...], key: str) -> "MpiBackend":
        """MPI_Comm_create_group over `ranks` (members only), tagged by a hash of `key`."""
        parent = self._comm.Get_group()
        members = parent.Incl(list(ranks))
        comm = self._comm.Create_group(members, zlib.crc32(key.encode()) % (self._tag_ub + 1))
        members.Free()
        parent.Free()
        sub = MpiBackend(comm, tuple(self.world_ranks[r] for r in ranks), _adopt=True)
        sub.device = self.device
        return sub

    def close(self, timeout: float | None = 10.0) -> None:
        """Collective: once every member is here (no peer sends any more), receive what nobody
        received, then free the communicators."""
        if self._comm is None:
            return
        if self._progress is not None:
            self._progress.stop()
        try:
            _wait_request(self._comm.Ibarrier(), timeout)
            _unsent.extend(self._p2p.close())
        except DeadlineExpired:     # a member that never closes: free ours anyway
            pass
        for comm in (self._idle, self._head, self._comm):
            comm.Free()
        self._comm = self._idle = self._head = None
        _live.discard(self)


def _no_progress() -> None:
    return None


def _stop_threads() -> None:
    """At exit, before MPI_Finalize: a progress thread still in MPI would crash it."""
    for backend in list(_live):
        if backend._progress is not None:
            backend._progress.stop()
