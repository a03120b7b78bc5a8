"""The gloo backend: torch.distributed's gloo process groups on CPU processes.

With device="cuda" a rank's tensors live on a GPU and every message is staged through the
host (a copy each way): the way to run GPU code with more ranks than GPUs, or on one GPU.

Each Group owns a ProcessGroupGloo built directly from the job's store (no global
torch.distributed state, so several jobs and sub-groups live side by side).
Point-to-point messages are framed by framing.Framer (header + payload parts whose wire
tags carry their lengths: gloo aborts on a message larger than its receive; a message's
header, with a small payload, goes on a wire tag of its own, straight to its receive).
Waits take the run's deadline: gloo's own per-op timeout. Its expiry closes the connection,
which is fine: a deadline expiry ends the run with a deadlock report.
"""

from __future__ import annotations

import datetime
import math

import torch
import torch.distributed as dist

from ..backend import Backend, DeadlineExpired, Work
from ..devices import CPU, rank_device
from ..errors import PeerFailedError
from .framing import Framer

C10D_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
        "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
# dtypes gloo cannot reduce or move: reduce them in a wider type, move them as bytes.
_WIDER = {torch.int16: torch.int32, torch.uint16: torch.int32, torch.uint32: torch.int64,
          torch.uint64: torch.int64}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        _WIDER[getattr(torch, _name)] = torch.float32
_NO_TIMEOUT = datetime.timedelta(days=7)


_SPANS: dict[int, datetime.timedelta] = {}
_SPAN_STEPS = 64        # a wait's limit is rounded up to 1/64 s, so that the limits left after a
# first wait (the deadline less a few microseconds) share one timedelta instead of making a new one


def _span(seconds: float) -> datetime.timedelta:
    """datetime.timedelta(seconds), rounded up to 1/64 s (at least 1 ms), cached: most waits take
    the run's deadline or what is left of it, and making one per wait was a measurable part of a
    message's cost (a 1 MB message waits three times)."""
    steps = math.ceil(seconds * _SPAN_STEPS)
    span = _SPANS.get(steps)
    if span is None:
        if len(_SPANS) > 64:
            _SPANS.clear()
        span = _SPANS[steps] = datetime.timedelta(seconds=max(steps / _SPAN_STEPS, 0.001))
    return span


class _GlooWork(Work):
    """Wraps a c10d Work; turns gloo's timeout into DeadlineExpired and a lost peer into PeerFailedError."""

    __slots__ = ("_work", "_rank", "_after")

    def __init__(self, work, rank: int, after=None):
        self._work, self._rank, self._after = work, rank, after

    def wait(self, timeout: float | None) -> None:
        try:
            if timeout is None:
                self._work.wait()
            else:
                self._work.wait(_span(timeout))
        except RuntimeError as exc:
            text = str(exc)
            if "Timed out" in text or "timed out" in text or "Timeout" in text:
                raise DeadlineExpired(text) from None
            raise PeerFailedError(
                f"rank {self._rank}: the gloo connection to a peer broke ({text.splitlines()[0].split('. ')[0][-160:]}). "
                f"Another rank probably crashed or was killed; its own error is the one to read.") from None
        if self._after is not None:
            self._after()
            self._after = None


class GlooBackend(Backend):
    """Backend over a ProcessGroupGloo. `store` is a c10d Store shared by the job."""

    name = "gloo"

    def __init__(self, store, rank: int, size: int, world_ranks: tuple[int, ...], key: str,
                 pg_timeout: float | None = None, device: torch.device = CPU):
        self.rank, self.size, self.world_ranks = rank, size, tuple(world_ranks)
        self.device = device
        self._store, self._key = store, key
        timeout = _NO_TIMEOUT if pg_timeout is None else datetime.timedelta(seconds=pg_timeout)
        self._pg_timeout = pg_timeout
        self._pg = dist.ProcessGroupGloo(dist.PrefixStore(f"pg/{key}", store), rank, size, timeout)
        self._framer = Framer(self._raw_isend, self._raw_irecv, self._raw_irecv_any, rank, size, self._name_rank)
        if type(self).isend is GlooBackend.isend and type(self).irecv is GlooBackend.irecv:
            self.isend, self.irecv = self._framer.isend, self._framer.irecv   # one call less per message

    @classmethod
    def world(cls, store, rank: int, size: int, key: str, device=None) -> "GlooBackend":
        return cls(store, rank, size, tuple(range(size)), key, device=rank_device(device, rank))

    def _name_rank(self, r: int) -> str:
        w = self.world_ranks[r]
        return f"rank {r}" if w == r else f"rank {r} (world rank {w})"

    # -- point to point ------------------------------------------------------------------
    def _raw_isend(self, buf: torch.Tensor, dst: int, wire_tag: int) -> Work:
        if buf.device.type != "cpu":
            buf = buf.cpu()
        return _GlooWork(self._pg.send([buf], dst, wire_tag), self.rank)

    def _raw_irecv(self, buf: torch.Tensor, src: int, wire_tag: int) -> Work:
        if buf.device.type == "cpu":
            return _GlooWork(self._pg.recv([buf], src, wire_tag), self.rank)
        host = torch.empty_like(buf, device="cpu")
        return _GlooWork(self._pg.recv([host], src, wire_tag), self.rank, after=lambda: buf.copy_(host))

    def _raw_irecv_any(self, buf: torch.Tensor, wire_tag: int):
        return _GlooWork(self._pg.recv_anysource([buf], wire_tag), self.rank)

    def isend(self, tensor, dst, tag, op):
        return self._framer.isend(tensor, dst, tag, op)

    def irecv(self, tensor, src, tag, op):
        return self._framer.irecv(tensor, src, tag, op)

    # -- collectives ---------------------------------------------------------------------
    def _reduce(self, out: torch.Tensor, tensor: torch.Tensor, post) -> Work:
        """post(out_buf, in_buf) on `out` and `tensor` themselves when gloo can reduce their dtype
        on the CPU; else on wider host copies, with the result copied back into `out`."""
        wider = _WIDER.get(tensor.dtype)
        if wider is None and tensor.device.type == "cpu":
            return _GlooWork(post(out, tensor), self.rank)
        src = tensor.to(device="cpu", dtype=wider or tensor.dtype)
        dst = src if out is tensor else torch.empty(out.shape, dtype=src.dtype)
        return _GlooWork(post(dst, src), self.rank, after=lambda: out.copy_(dst))

    def all_reduce(self, tensor, op):
        if tensor.numel() == 0:
            return self.barrier()
        opts = dist.AllreduceOptions()
        opts.reduceOp = C10D_OPS[op]
        return self._reduce(tensor, tensor, lambda _, buf: self._pg.allreduce([buf], opts))

    def reduce_scatter(self, out, tensor, op):
        if tensor.numel() == 0:
            return self.barrier()
        opts = dist.ReduceScatterOptions()
        opts.reduceOp = C10D_OPS[op]
        # gloo's flat reduce-scatter: about 2.5x faster than its list form (one output per rank)
        # on 200 KB at 4 ranks; the Group's rows split evenly, as it requires
        return self._reduce(out, tensor, lambda dst, src: self._pg._reduce_scatter_base(dst, src, opts))

    def all_gather(self, out, tensor):
        if tensor.numel() == 0:
            return self.barrier()
        # Gathering moves bytes only: a uint8 view works for every dtype. A CPU `out` is
        # gathered into directly; anything else goes through a host buffer.
        host_in = tensor.cpu().reshape(-1).view(torch.uint8)
        direct = out.device.type == "cpu" and out.is_contiguous()
        host_out = out.reshape(-1).view(torch.uint8) if direct else \
            torch.empty(out.numel() * out.element_size(), dtype=torch.uint8)
        work = self._pg.allgather([list(host_out.chunk(self.size))], [host_in])
        after = None if direct else (lambda: out.copy_(host_out.view(out.dtype).view(out.shape)))
        return _GlooWork(work, self.rank, after=after)

    def broadcast(self, tensor, src):
        if tensor.numel() == 0:
            return self.barrier()
        opts = dist.BroadcastOptions()
        opts.rootRank = src
        host = tensor.reshape(-1).view(torch.uint8) if tensor.device.type == "cpu" \
            else tensor.cpu().reshape(-1).view(torch.uint8)
        after = None if tensor.device.type == "cpu" else (lambda: tensor.copy_(host.view(tensor.dtype).view(tensor.shape)))
        return _GlooWork(self._pg.broadcast([host], opts), self.rank, after=after)

    def barrier(self):
        return _GlooWork(self._pg.barrier(), self.rank)

    # -- groups --------------------------------------------------------------------------
    def subgroup(self, ranks, key):
        return type(self)(self._store, ranks.index(self.rank), len(ranks),
                          tuple(self.world_ranks[r] for r in ranks), key, self._pg_timeout, self.device)

    def close(self):
        """Collective over the group's members: ends the listener threads, then the connections."""
        if self._pg is not None:
            self._framer.close()
            self._pg = None

    def close_at_exit(self) -> None:
        """close() in a process about to end: the listeners end as in close(), and the process group
        is left to the process's end (its destructor takes 20-40 ms, one rank after another)."""
        if type(self).close is not GlooBackend.close:     # a subclass's close (nccl's) runs in full
            self.close()
        elif self._pg is not None:
            self._framer.close()
            _AT_EXIT.append(self._pg)
            self._pg = None


_AT_EXIT: list = []     # process groups of close_at_exit(): never destroyed, the process ends
