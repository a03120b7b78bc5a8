"""Group: the one interface rank code sees, whatever the backend.

    def main(group):                      # launch(main, world_size=4)
        x = torch.full((4,), float(group.rank))
        if group.rank == 0:
            group.send(x, dst=1)
        elif group.rank == 1:
            group.recv(x, src=0)

Point-to-point: send, recv, isend/irecv (handles with wait()), sendrecv, barrier.
Provided collectives (all_reduce, all_gather, reduce_scatter, broadcast) call the
backend's native implementation; a run can switch them off (HW1 builds its own).
Sub-groups come from a list of ranks and are passed around explicitly.

Every call is counted and traced (observe/trace.py) and every blocking wait has the run's
deadline: on expiry a DeadlockError lists each rank's pending op and the
wait-for cycle (observe/deadlock.py).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import torch

from .backend import Backend, DeadlineExpired, SendrecvSite, Work
from .checks import check_rank, check_tag, check_tensor, where
from .context import RankContext
from .errors import DeadlockError, PeerFailedError
from .handle import CollectiveHandle, Handle, wait_all
from .observe.deadlock import find_cycle, format_report, wait_for_edges
from .observe.tracker import OpTracker
from .provided import ProvidedCollectives
from .transports.wire import MAX_TAG, check_match

__all__ = ["Group", "RankContext", "Handle", "CollectiveHandle", "wait_all"]
_RECEIVES = frozenset(("recv", "irecv"))


class Group(ProvidedCollectives):
    """A set of ranks that talk to each other. Rank code receives one; pass it explicitly."""

    def __init__(self, backend: Backend, ctx: RankContext, name: str = "world"):
        self._backend = backend
        self._ctx = ctx
        self.name = name
        self._collective_seq = 0
        self._site = SendrecvSite(ctx.recorder, self._wait, name)   # for Backend.sendrecv
        self._subgroup_counts: dict[tuple[int, ...], int] = defaultdict(int)
        self._wall_clock = type(backend).now is Backend.now     # no simulated clock: _clock is wall time
        fast = backend.bind_sendrecv(self)      # sim: a compiled sendrecv for the usual case (sim/express.py)
        if fast is not None:
            self.sendrecv = fast

    # -- identity ----------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        """This process's rank in the group, 0..size-1."""
        return self._backend.rank

    @property
    def size(self) -> int:
        """Number of ranks in the group."""
        return self._backend.size

    @property
    def ranks(self) -> tuple[int, ...]:
        """World rank of each group rank."""
        return self._backend.world_ranks

    @property
    def world_rank(self) -> int:
        return self._ctx.world_rank

    @property
    def device(self) -> torch.device:
        """Where this rank computes: cpu, or its GPU (launch(..., device="cuda") or backend="nccl")."""
        return self._backend.device

    @property
    def backend(self) -> str:
        """"gloo", "mpi" or "sim"."""
        return self._backend.name

    @property
    def collectives_enabled(self) -> bool:
        """Whether the provided collectives may be called in this run."""
        return self._ctx.collectives

    @property
    def counters(self):
        """This rank's Counters (shared by all its groups)."""
        return self._ctx.recorder.counters

    @property
    def events(self):
        """This rank's trace events so far."""
        return self._ctx.recorder.events

    def __repr__(self) -> str:
        return f"Group({self.name}, rank={self.rank}, size={self.size}, backend={self.backend})"

    # -- time --------------------------------------------------------------------------------
    def _clock(self) -> float:
        if self._wall_clock:
            return time.perf_counter() - self._ctx.t0
        sim_time = self._backend.now()
        return sim_time if sim_time is not None else time.perf_counter() - self._ctx.t0

    def now(self) -> float:
        """Seconds since the run started: simulated on sim, wall-clock elsewhere."""
        return self._clock()

    def compute(self, seconds: float) -> None:
        """Charge `seconds` of local computation: advances the clock on sim, no-op elsewhere."""
        if seconds < 0:
            raise ValueError(f"compute: seconds must be >= 0, got {seconds}")
        self._backend.compute(seconds)

    def _wait(self, work: Work, op_text: str | tuple, waits_for: tuple[int, ...], collective: str = "") -> None:
        """A blocking wait. op_text: what the rank is doing, for reports (a tuple: see OpTracker.op_text)."""
        ctx = self._ctx
        ctx.tracker.begin(op_text, waits_for, collective, sys._getframe())   # the line: when reported
        try:
            work.wait(ctx.deadline)
        except DeadlineExpired:
            op_text = OpTracker.op_text(op_text, None)
            # The board keeps showing this rank in op_text (it never left it), so the other
            # ranks' reports still see the whole cycle.
            states = ctx.tracker.snapshot()
            headline = (f"deadlock: {op_text} on rank {ctx.world_rank} did not complete within "
                        f"its {ctx.deadline:g} s deadline.")
            raise DeadlockError(format_report(headline, states, ctx.world_size)) from None
        except PeerFailedError:
            op_text = OpTracker.op_text(op_text, None)
            # A peer gave up on this connection (its own deadline closed it on gloo, or it died):
            # this rank is still, for every report, waiting in op_text. When the board shows this
            # rank on a wait-for cycle, the cause is the deadlock, and this rank reports it too.
            states = ctx.tracker.snapshot()
            cycle = find_cycle(wait_for_edges(states))
            if cycle and ctx.world_rank in cycle:
                headline = (f"deadlock: {op_text} on rank {ctx.world_rank} was cut off: another rank "
                            f"on the cycle reached its deadline and closed the connection.")
                raise DeadlockError(format_report(headline, states, ctx.world_size)) from None
            raise
        except BaseException:
            ctx.tracker.end()
            raise
        ctx.tracker.end()

    # -- point to point ----------------------------------------------------------------------
    def isend(self, tensor: torch.Tensor, dst: int, tag: int = 0, _op: str = "isend") -> Handle:
        """Start sending `tensor` to rank `dst`; do not modify it until the handle is waited.

        Any dtype, any shape (incl. zero-size). The receiver's buffer must match exactly.
        """
        check_tensor(self, tensor, _op)
        check_rank(self, dst, _op, "dst")
        check_tag(self, tag, _op)
        start = self._clock()
        payload = tensor.contiguous()
        work = self._backend.isend(payload, dst, tag, _op)
        self._ctx.recorder.count(_op, sent=1, bytes_sent=payload.nbytes)
        return Handle(self, work, _op, dst, tag, payload.nbytes, start, tensor, None)

    def irecv(self, tensor: torch.Tensor, src: int, tag: int = 0, _op: str = "irecv") -> Handle:
        """Start receiving into `tensor` from rank `src`; `wait()` returns the filled tensor.

        The message must have exactly `tensor`'s dtype and shape, else MessageMismatchError.
        """
        check_tensor(self, tensor, _op)
        check_rank(self, src, _op, "src")
        check_tag(self, tag, _op)
        start = self._clock()
        staging = None if tensor.is_contiguous() else torch.empty_like(tensor, memory_format=torch.contiguous_format)
        work = self._backend.irecv(tensor if staging is None else staging, src, tag, _op)
        self._ctx.recorder.count(_op, recv=1, bytes_recv=tensor.nbytes)
        return Handle(self, work, _op, src, tag, tensor.nbytes, start, tensor, staging)

    def _plain(self, tensor, peer, tag) -> bool:
        """The common case of a blocking send/recv, checked at once (else the full checks run)."""
        backend = self._backend
        return (type(tensor) is torch.Tensor and type(peer) is int and type(tag) is int
                and 0 <= peer < backend.size and peer != backend.rank and 0 <= tag <= MAX_TAG
                and tensor.is_contiguous())

    def send(self, tensor: torch.Tensor, dst: int, tag: int = 0) -> None:
        """Send `tensor` to rank `dst`; returns once the tensor may be reused."""
        if not self._plain(tensor, dst, tag):
            self.isend(tensor, dst, tag, _op="send").wait()
            return
        self._blocking("send", tensor, dst, tag)

    def recv(self, tensor: torch.Tensor, src: int, tag: int = 0) -> torch.Tensor:
        """Receive from rank `src` into `tensor` (in place) and return it."""
        if not self._plain(tensor, src, tag):
            return self.irecv(tensor, src, tag, _op="recv").wait()
        self._blocking("recv", tensor, src, tag)
        return tensor

    def _blocking(self, op: str, tensor: torch.Tensor, peer: int, tag: int) -> None:
        """isend/irecv(...).wait() without the Handle (a small message's cost is its overhead)."""
        backend, recorder, nbytes = self._backend, self._ctx.recorder, tensor.nbytes
        start = self._clock()
        sending = op == "send"
        work = (backend.isend if sending else backend.irecv)(tensor, peer, tag, op)
        recorder.count_message(op, sending, nbytes)
        peer = backend.world_ranks[peer]
        self._wait_p2p(work, op, peer, tag)
        recorder.event(op, peer, tag, nbytes, start, self._clock(), self.name)

    def _wait_p2p(self, work: Work, op: str, peer: int, tag: int) -> None:
        """Wait for a send or receive to world rank `peer` (tracked for deadlock reports unless done)."""
        if not work.finish_now():
            self._wait(work, (op, "src" if op in _RECEIVES else "dst", peer, tag), (peer,))

    def sendrecv(self, send_tensor: torch.Tensor, dst: int, recv_tensor: torch.Tensor, src: int,
                 tag: int = 0) -> torch.Tensor:
        """Send `send_tensor` to `dst` while receiving `recv_tensor` from `src`; return it.

        Both directions are in flight at once, so a ring step (send right, receive left)
        cannot deadlock. Cost: alpha + n*s*beta (full-duplex links). With dst == src ==
        this rank (a ring of one) it is a local copy.
        """
        size, rank = self._backend.size, self._backend.rank
        if not (type(send_tensor) is torch.Tensor and type(recv_tensor) is torch.Tensor
                and type(dst) is int and type(src) is int and type(tag) is int
                and 0 <= dst < size and 0 <= src < size and dst != rank and src != rank
                and 0 <= tag <= MAX_TAG):
            # not the common case: the full checks raise the right error (or allow a ring of one)
            for t, name in ((send_tensor, "send_tensor"), (recv_tensor, "recv_tensor")):
                check_tensor(self, t, "sendrecv", name)
            if dst == src == self.rank:  # a ring of one: the exchange is a local copy, no message
                check_match(recv_tensor, send_tensor.dtype, tuple(send_tensor.shape), "sendrecv", "sendrecv",
                            f"rank {self.rank}", f"rank {self.rank}", tag)
                return recv_tensor.copy_(send_tensor)
            check_rank(self, dst, "sendrecv", "dst")
            check_rank(self, src, "sendrecv", "src")
            check_tag(self, tag, "sendrecv")
        done = self._backend.sendrecv(send_tensor, dst, recv_tensor, src, tag, self._site)
        if done is not None:                    # sim: the whole exchange in one call (sim/sendrecv.py)
            return done
        start = self._clock()
        staging = None if recv_tensor.is_contiguous() else torch.empty_like(recv_tensor, memory_format=torch.contiguous_format)
        payload = send_tensor.contiguous()
        rwork = self._backend.irecv(recv_tensor if staging is None else staging, src, tag, "sendrecv")
        swork = self._backend.isend(payload, dst, tag, "sendrecv")
        sent, received = payload.nbytes, recv_tensor.nbytes
        self._ctx.recorder.count("sendrecv", sent=1, recv=1, bytes_sent=sent, bytes_recv=received)
        ranks = self._backend.world_ranks
        if not (rwork.finish_now() and swork.finish_now()):
            text = f"sendrecv(dst={ranks[dst]}, src={ranks[src]}, tag={tag})"
            self._wait(rwork, text, (ranks[src],))
            self._wait(swork, text, (ranks[dst],))
        if staging is not None:
            recv_tensor.copy_(staging)
        self._ctx.recorder.event("sendrecv", ranks[dst], tag, sent + received, start, self._clock(), self.name)
        return recv_tensor

    # -- sub-groups --------------------------------------------------------------------------
    def subgroup(self, ranks) -> "Group":
        """A group of some ranks of this one (ranks of *this* group), e.g. a TP group of a mesh.

        Called by every member, with the same list; not by the other ranks. Ranks in the
        new group are numbered by their order in the sorted list.
        """
        members = sorted({int(r) for r in ranks})
        if not members or members[0] < 0 or members[-1] >= self.size:
            raise ValueError(f"subgroup on {where(self)}: ranks {list(ranks)} must be ranks of this "
                             f"group (0..{self.size - 1})")
        if self.rank not in members:
            raise ValueError(f"subgroup on {where(self)}: this rank is not in {members}; only the "
                             f"members call subgroup(ranks)")
        count = self._subgroup_counts[tuple(members)]
        self._subgroup_counts[tuple(members)] += 1
        world = [self.ranks[r] for r in members]
        name = f"group{world}" + (f"#{count}" if count else "")
        backend = self._backend.subgroup(tuple(members), f"{self._ctx.run_id}/{self.name}/{name}")
        self._ctx.subgroups.append(backend)
        return Group(backend, self._ctx, name=name)
