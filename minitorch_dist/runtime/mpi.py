"""The mpi backend: Group messages over mpi4py, for programs started by mpirun/mpiexec.

    mpirun -n 4 python train.py      # in train.py: run_mpi(main), or group = mpi_world_group()

Point-to-point: wire.Framer over MPI Isend/Irecv of raw bytes, handed to MPI without
a copy. Control messages (headers, small payloads) travel on a communicator of their
own, received from any source by the Framer's listener thread; payloads on the
group's data communicator. Provided collectives: MPI's non-blocking ones (Iallreduce,
Iallgather, Ireduce_scatter_block, Ibcast, Ibarrier); dtypes MPI cannot reduce
(float16, bfloat16, float8, bool) are reduced in a float32/uint8 copy.

MPI_Wait has no timeout, so rank code polls its requests: it spins for _SPIN_S (a
message in flight completes at full speed), then naps with a backoff capped at 1 ms,
and honours the run's deadline; on expiry the Group builds the deadlock report from
the states every rank publishes to a TCPStore hosted by rank 0. Only one thread of a
rank is in MPI at a time when it matters (see _Listener): two slow each other down.

MPI here is not CUDA-aware: CUDA tensors travel through host copies. mpi4py.MPI is
imported on first use, so importing this module does not initialise MPI.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
import time
import traceback
import uuid
import zlib
from datetime import timedelta

import torch

from . import wire
from .backend import Backend, DeadlineExpired, DoneWork, Work
from .context import RankContext
from .errors import PeerFailedError
from .group import Group
from .trace import Recorder
from .tracker import FINISHED, BoardTracker

_SPIN_S = 5e-3        # busy-poll this long first: a message in flight completes at full speed
_NAP_MIN_S = 1e-5     # then sleep between polls, doubling from this...
_NAP_MAX_S = 1e-3     # ...up to this: a long wait costs little CPU and is at most ~1 ms late
_LISTEN_NAP_S = 1e-3  # the idle listener's nap: rank code keeps the CPU and drives MPI

_MPIRUN_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")
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
_live: set = set()   # backends whose listener may still run: stopped at exit, before MPI_Finalize


def _mpi():
    """The mpi4py.MPI module (initialises MPI on first call)."""
    from mpi4py import MPI
    return MPI


def running_under_mpirun() -> bool:
    """True when this process was started by mpirun/mpiexec/srun (Open MPI, MPICH, PMIx env)."""
    return any(name in os.environ for name in _MPIRUN_ENV)


def _wait_request(req, timeout: float | None) -> None:
    """Poll `req` until it completes: spin for _SPIN_S, then nap with a growing backoff.

    Raises DeadlineExpired when `timeout` seconds (None: no limit) pass first.
    """
    if req.Test():
        return
    start = time.perf_counter()
    end = None if timeout is None else start + timeout
    nap = _NAP_MIN_S
    while True:
        now = time.perf_counter()
        if end is not None and now >= end:
            raise DeadlineExpired(f"MPI request not complete after {timeout:g} s")
        if now - start >= _SPIN_S:
            time.sleep(nap if end is None else min(nap, end - now))
            nap = min(2 * nap, _NAP_MAX_S)
        if req.Test():
            return


class _RequestWork(Work):
    """One MPI request. `keep` holds its buffers alive; `finish` (copy back) runs once, after."""

    def __init__(self, backend: "MpiBackend", req, keep, finish=None):
        self._backend, self._req, self._keep, self._finish = backend, req, keep, finish

    def wait(self, timeout: float | None) -> None:
        if self._req is None:
            return
        self._backend._listener.defer()    # rank code drives MPI now: the listener steps back
        try:
            _wait_request(self._req, timeout)
        except DeadlineExpired:            # MPI may still write there: keep it until it is done
            orphans = self._backend._orphans
            orphans[:] = [o for o in orphans if not o[0].Test()] + [(self._req, self._keep)]
            raise
        self._req, self._keep = None, None
        if self._finish is not None:
            self._finish()
            self._finish = None


class _Listener:
    """How the Framer's listener thread waits for control messages on `ctrl` (any source).

    Hot (rank code waits on a receive, for up to _SPIN_S): it blocks in MPI_Wait, in C,
    without the GIL, and sees the header within microseconds. Rank code ends a hot wait
    by sending its own rank a byte on `ctrl` (a ping, dropped here); the first header
    delivered ends it too, so that rank code, about to wake, has the CPU.
    Idle: it polls every 1 ms, and not at all for _SPIN_S after rank code started an
    MPI wait of its own (defer): whichever thread is in MPI when a large message flows
    copies all of it, and two threads in MPI slow each other down. It never spins in
    Python: a thread spinning on MPI_Test starves rank code of the GIL.
    """

    def __init__(self, ctrl, rank: int):
        self._ctrl, self._rank = ctrl, rank
        self._lock = threading.Lock()
        self._wake = threading.Event()       # set when rank code starts waiting on a receive
        self.hot = self._blocking = self._closing = False
        self._defer_until = 0.0
        self.thread: threading.Thread | None = None
        self._ping = bytearray(1)

    def heat(self) -> None:
        self.hot = True
        self._wake.set()

    def defer(self) -> None:
        """Rank code polls MPI itself (or is about to): no listener MPI calls for _SPIN_S."""
        if self.hot:
            self.cool()
        self._defer_until = time.perf_counter() + _SPIN_S

    def cool(self) -> None:
        """Back to naps; ping the listener out of MPI_Wait if it is blocked there."""
        with self._lock:
            self.hot, ping, self._blocking = False, self._blocking, False
        if ping:
            self._ctrl.Isend([self._ping, _mpi().BYTE], self._rank, 0).Free()

    def post(self, buf: torch.Tensor) -> Work:
        """The listener thread's receive of its next control message, into `buf`."""
        if self._closing:
            raise PeerFailedError(f"rank {self._rank}: the mpi group was closed")
        self.thread = threading.current_thread()
        return _ListenWork(self, self._ctrl.Irecv(_raw(buf), _mpi().ANY_SOURCE, 0), buf)

    def wait(self, req, buf) -> None:
        """Until `req` (an any-source receive into `buf`) holds a message from a peer."""
        status = _mpi().Status()
        try:
            while True:
                with self._lock:
                    self._blocking = self.hot and not self._closing
                if self._blocking:
                    req.Wait(status)
                elif time.perf_counter() < self._defer_until or not req.Test(status):
                    if self._closing:
                        req.Cancel()
                        req.Wait()
                        raise PeerFailedError(f"rank {self._rank}: the mpi group was closed")
                    if self._wake.wait(_LISTEN_NAP_S):     # rank code began waiting on a receive
                        self._wake.clear()
                    continue
                if status.Get_source() != self._rank:
                    self.hot = False     # rank code is about to run: leave it the CPU
                    return
                req = self._ctrl.Irecv(_raw(buf), _mpi().ANY_SOURCE, 0)  # that was a ping
        finally:
            with self._lock:
                self._blocking = False

    def stop(self, timeout: float = 2.0) -> None:
        """Local: end the listener thread and its pending receive, so MPI can be finalised."""
        self._closing = True
        self.cool()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)


class _ListenWork(Work):
    def __init__(self, listener: _Listener, req, buf: torch.Tensor):
        self._listener, self._req, self._buf = listener, req, buf

    def wait(self, timeout: float | None) -> None:   # the listener thread waits forever
        self._listener.wait(self._req, self._buf)


class _RecvWait(Work):
    """A Framer receive. Waiting on it makes the listener hot for up to _SPIN_S.

    A longer wait goes on after the Framer's DeadlineExpired at _SPIN_S (its receives
    may be waited on again), with the listener back to naps.
    """

    def __init__(self, listener: _Listener, work: Work):
        self._listener, self._work = listener, work

    def wait(self, timeout: float | None) -> None:
        self._listener.heat()
        try:
            if timeout is None or timeout > _SPIN_S:
                start = time.perf_counter()
                try:
                    return self._work.wait(_SPIN_S)
                except DeadlineExpired:      # a long wait: the listener goes back to naps
                    self._listener.cool()
                timeout = None if timeout is None else timeout - (time.perf_counter() - start)
            self._work.wait(timeout)
        finally:
            self._listener.cool()


def _raw(t: torch.Tensor) -> list:
    """MPI message spec for the bytes of a contiguous CPU tensor: no copy, ~0.5 us."""
    MPI = _mpi()
    return [MPI.buffer.fromaddress(t.data_ptr(), t.numel() * t.element_size()), MPI.BYTE]


def _host(t: torch.Tensor, dtype: torch.dtype | None = None, copy: bool = True) -> torch.Tensor:
    """`t` itself when it is on the CPU with `dtype`; else a CPU copy (or empty buffer) of it."""
    dtype = t.dtype if dtype is None else dtype
    if t.device.type == "cpu" and t.dtype == dtype:
        return t
    return t.detach().to("cpu", dtype).contiguous() if copy else torch.empty(t.shape, dtype=dtype)


class MpiBackend(Backend):
    """Backend over (duplicates of) an mpi4py communicator. Ranks are ranks of `comm`.

    `world_ranks`: world rank of each comm rank (default: translated via COMM_WORLD).
    Creating one is collective over `comm`, and so is close().
    """

    name = "mpi"

    def __init__(self, comm, world_ranks: tuple[int, ...] | None = None, _adopt: bool = False):
        MPI = _mpi()
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise RuntimeError("mpi backend: MPI was initialised without MPI_THREAD_MULTIPLE; the "
                               "listener thread needs it. Do not lower mpi4py.rc.thread_level.")
        self._MPI = MPI
        self._comm = comm if _adopt else comm.Dup()   # payloads and collectives
        self._ctrl = self._comm.Dup()                 # control messages, tag 0, any source
        self.rank, self.size = self._comm.Get_rank(), self._comm.Get_size()
        if world_ranks is None:
            world_ranks = MPI.Group.Translate_ranks(comm.Get_group(), list(range(self.size)),
                                                    MPI.COMM_WORLD.Get_group())
        self.world_ranks = tuple(world_ranks)
        # MPI keeps messages with equal (source, tag) in order, so folding the Framer's
        # sequence numbers into the bits MPI's tags have left loses nothing.
        self._tag_ub = self._comm.Get_attr(MPI.TAG_UB)
        self._seq_bits = min(self._tag_ub.bit_length() - wire.TAG_BITS, wire.SEQ_BITS)
        if self._seq_bits < 1:
            raise RuntimeError(f"mpi backend: this MPI's largest tag is {self._tag_ub}, too small for "
                               f"{wire.TAG_BITS}-bit user tags; use the gloo backend")
        self._orphans: list = []               # buffers of requests abandoned at a deadline
        self._listener = _Listener(self._ctrl, self.rank)
        self._framer = wire.Framer(self._raw_isend, self._raw_irecv, self._raw_irecv_any,
                                   self.rank, self.size, self._name_rank)
        if not _live:
            atexit.register(_stop_listeners)
        _live.add(self)

    def _name_rank(self, r: int) -> str:
        w = self.world_ranks[r]
        return f"rank {r}" if w == r else f"rank {r} (world rank {w})"

    def _work(self, req, keep, finish=None) -> Work:
        return _RequestWork(self, req, keep, finish)

    # -- point to point: raw byte messages under the Framer -------------------------------------
    def _route(self, wire_tag: int):
        """(communicator, MPI tag) of a wire tag."""
        if wire_tag == wire.CONTROL_TAG:
            return self._ctrl, 0
        tag, seq = wire_tag >> wire.SEQ_BITS, wire_tag & ((1 << wire.SEQ_BITS) - 1)
        return self._comm, (tag << self._seq_bits) | (seq & ((1 << self._seq_bits) - 1))

    def _raw_isend(self, buf: torch.Tensor, dst: int, wire_tag: int) -> Work:
        comm, tag = self._route(wire_tag)
        host = _host(buf)
        return self._work(comm.Isend(_raw(host), dst, tag), (buf, host))

    def _raw_irecv(self, buf: torch.Tensor, src: int, wire_tag: int) -> Work:
        if threading.current_thread() is self._listener.thread:
            self._listener.defer()             # a payload whose receiver will wait on it soon
        comm, tag = self._route(wire_tag)
        host = _host(buf, copy=False)
        req = comm.Irecv(_raw(host), src, tag)
        return self._work(req, (buf, host), None if host is buf else (lambda: buf.copy_(host)))

    def _raw_irecv_any(self, buf: torch.Tensor, wire_tag: int) -> Work:
        assert wire_tag == wire.CONTROL_TAG, "the Framer receives only control messages from any source"
        return self._listener.post(buf)

    def isend(self, tensor: torch.Tensor, dst: int, tag: int, op: str) -> Work:
        return self._framer.isend(tensor, dst, tag, op)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int, op: str) -> Work:
        return _RecvWait(self._listener, self._framer.irecv(tensor, src, tag, op))

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
        return MpiBackend(comm, tuple(self.world_ranks[r] for r in ranks), _adopt=True)

    def close(self, timeout: float | None = 10.0) -> None:
        """Collective: end the listeners (the Framer's goodbyes), then free the communicators."""
        if self._comm is None:
            return
        try:
            self._framer.close(timeout)
        except Exception:  # noqa: BLE001 - a peer that never said goodbye: stop ours anyway
            pass
        self._listener.stop()
        for comm in (self._ctrl, self._comm):
            comm.Free()
        self._comm = self._ctrl = None
        _live.discard(self)


def _stop_listeners() -> None:
    """At exit, before MPI_Finalize: a listener still in MPI would crash it."""
    for backend in list(_live):
        backend._listener.stop()


# -- the world group of an mpirun job ---------------------------------------------------------

def _open_store(world, rank: int, size: int):
    """A TCPStore hosted by rank 0 on a free port, reached by every rank; and a fresh key prefix."""
    from torch.distributed import TCPStore
    hosts = world.allgather(socket.gethostname())
    timeout, info, store = timedelta(seconds=60), None, None
    if rank == 0:
        host = "127.0.0.1" if len(set(hosts)) == 1 else hosts[0]
        store = TCPStore(host, 0, size, is_master=True, wait_for_workers=False, timeout=timeout)
        info = (host, store.port, f"minitorch_dist/mpi/{uuid.uuid4().hex}")
    host, port, prefix = world.bcast(info, root=0)
    if rank != 0:
        store = TCPStore(host, port, size, is_master=False, timeout=timeout)
    return store, prefix


def mpi_world_group(deadline: float | None = 60.0, collectives: bool = True, trace: bool = True,
                    publish_after: float = 0.1) -> Group:
    """The world Group of a process started by mpirun/mpiexec (collective: every rank calls it).

    deadline: seconds a blocking op may wait before a DeadlockError (None: forever).
    collectives: whether the provided collectives are allowed. trace: record events.
    publish_after: seconds an op waits before its state goes on the deadlock board.
    At exit, every rank waits (up to `deadline`) for the others, so that rank 0's store
    serves deadlock reports until the last rank is done.
    """
    world = _mpi().COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    store, prefix = _open_store(world, rank, size)
    tracker = BoardTracker(store, rank, size, prefix, publish_after)
    backend = MpiBackend(world, tuple(range(size)))
    world.Barrier()
    ctx = RankContext(rank, size, deadline, collectives, Recorder(rank, trace=trace), tracker,
                      t0=time.perf_counter(), run_id=prefix)
    atexit.register(_at_exit, backend, ctx)
    return Group(backend, ctx)


def _at_exit(backend: MpiBackend, ctx: RankContext) -> None:
    """Mark this rank finished; wait for every rank (or the deadline); close the groups."""
    try:
        ctx.tracker.set_status(FINISHED, "returned")
        backend.barrier().wait(ctx.deadline)
        for sub in reversed(ctx.subgroups):   # collective, in the same order on every member
            sub.close()
        backend.close()
    except Exception:  # noqa: BLE001 - a rank that is gone: nothing left to wait for
        pass
    ctx.tracker.close()


def mpi_abort_on_error(rank: int, exc: BaseException, code: int = 1) -> None:
    """Print "[rank r] <traceback>" to stderr, then MPI_Abort the job: no rank is left hanging."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stdout.flush()
    sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.rstrip().splitlines()))
    sys.stderr.flush()
    _mpi().COMM_WORLD.Abort(code)


def run_mpi(main, *args, **group_kwargs):
    """group = mpi_world_group(**group_kwargs); return main(group, *args); abort the job on error."""
    group = mpi_world_group(**group_kwargs)
    try:
        return main(group, *args)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - a failure ends every rank
        mpi_abort_on_error(group.world_rank, exc)
