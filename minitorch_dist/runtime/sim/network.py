"""The sim backend: every rank a thread of this process, a virtual clock, an alpha-beta network.

    from minitorch_dist.runtime.sim import SimNetwork, run_sim

    def main(group):
        x = torch.full((4,), float(group.rank))
        return group.all_reduce(x)

    result = run_sim(main, world_size=1024, network=SimNetwork(alpha=1e-5, beta=1e-9))
    result.sim_time            # predicted seconds; the same on every run

One rank runs at a time (scheduler.py), so runs are deterministic and a
deadlock is reported the moment it happens, with the wait-for cycle. Messages
follow a single-port full-duplex alpha-beta model (p2p.py, port timetables in
ports.py); the provided collectives are computed directly and charged by the
cost model (collectives.py).
A thousand ranks fit on a laptop: threads get small stacks, and eager sends let a
ring step finish without a thread switch.

Why OS threads and not greenlets (cheaper switches): torch keeps grad mode, inference
mode, saved-tensor hooks (hw5's memory meters wrap blocking sends in them), autocast and
dispatch modes per OS thread, and offers no way to save and restore that state as a
whole; ranks sharing one thread would see each other's. The hand-offs are not where the
time goes anyway (sendrecv.py's module doc: 3-10% of a 1024-rank ring).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import torch

from ..backend import Backend, Work
from ..errors import LaunchError, PeerFailedError, RankError, user_traceback
from ..group import Group, RankContext
from ..observe.trace import Event, Recorder, merged_events
from ..results import RunResult
from . import collectives as sim_collectives
from . import express as sim_express
from . import p2p as sim_p2p
from . import sendrecv as sim_sendrecv
from .scheduler import Scheduler, SimTracker

STACK_SIZE = 4 << 20   # bytes of stack per rank thread: deep recursion needs ~2 MiB (default 8)


@dataclass(frozen=True)
class SimNetwork:
    """The simulated network: one message of n bytes takes alpha + n*beta seconds.

    alpha: seconds per message (latency).
    beta: seconds per byte (1 / bandwidth).
    eager_limit: messages of at most this many bytes are eager (buffered: the transfer
        starts when the send is posted); larger ones are rendezvous (the transfer starts
        once the receive is posted too). None: every message is eager.
    """

    alpha: float = 1e-5
    beta: float = 1e-9
    eager_limit: int | None = None

    def __post_init__(self):
        if not (self.alpha >= 0 and self.beta >= 0):
            raise ValueError(f"SimNetwork: alpha and beta must be >= 0, got alpha={self.alpha}, "
                             f"beta={self.beta}")
        if self.eager_limit is not None and self.eager_limit < 0:
            raise ValueError(f"SimNetwork: eager_limit must be >= 0 or None, got {self.eager_limit}")


class SimBackend(Backend):
    """Backend for one group of a sim run; all groups of the run share one Scheduler.

    `key` names the group (messages of different groups never match); `world_ranks`
    gives the world rank of each group rank.
    """

    name = "sim"

    def __init__(self, scheduler: Scheduler, rank: int, world_ranks: tuple[int, ...], key: str,
                 is_world: bool = True):
        self.scheduler = scheduler
        self.rank = rank
        self.size = len(world_ranks)
        self.world_ranks = world_ranks
        self.key = key
        self.me = world_ranks[rank]        # this rank's world rank
        self.slot = scheduler.slots[self.me]
        self.is_world = is_world
        self.collective_calls = 0
        # Group.sendrecv after its checks, in one call (Backend.sendrecv): a closure per backend
        self.sendrecv = sim_sendrecv.fast_sendrecv(self)

    def bind_sendrecv(self, group: Group):
        """The compiled Group.sendrecv (express.py), or None where it is not built."""
        return sim_express.bind(self, group)

    def rank_name(self, rank: int) -> str:
        """'rank 1' in the world group, 'rank 1 (world rank 3)' in a sub-group."""
        if self.is_world:
            return f"rank {rank}"
        return f"rank {rank} (world rank {self.world_ranks[rank]})"

    # -- point to point ---------------------------------------------------------------------
    # isend(tensor, dst, tag, op) and irecv(tensor, src, tag, op): the functions themselves,
    # without a wrapper call (one call less per message on the hot path)
    isend = sim_p2p.post_send
    irecv = sim_p2p.post_recv

    # -- native collectives -----------------------------------------------------------------
    def all_reduce(self, tensor: torch.Tensor, op: str) -> Work:
        return sim_collectives.enter(self, "all_reduce", tensor, op=op)

    def all_gather(self, out: torch.Tensor, tensor: torch.Tensor) -> Work:
        return sim_collectives.enter(self, "all_gather", tensor, out=out)

    def reduce_scatter(self, out: torch.Tensor, tensor: torch.Tensor, op: str) -> Work:
        return sim_collectives.enter(self, "reduce_scatter", tensor, out=out, op=op)

    def broadcast(self, tensor: torch.Tensor, src: int) -> Work:
        return sim_collectives.enter(self, "broadcast", tensor, op=src)

    def barrier(self) -> Work:
        return sim_collectives.enter(self, "barrier")

    # -- groups and time --------------------------------------------------------------------
    def subgroup(self, ranks: tuple[int, ...], key: str) -> "SimBackend":
        world = tuple(self.world_ranks[r] for r in ranks)
        return SimBackend(self.scheduler, ranks.index(self.rank), world, key, is_world=False)

    def now(self) -> float:
        return self.slot.clock

    def compute(self, seconds: float) -> None:
        self.slot.clock += seconds


def run_sim(fn, world_size: int, args=(), kwargs=None, *, network: SimNetwork | None = None,
            collectives: bool = True, trace: bool = True) -> RunResult:
    """Run `fn(group, *args, **kwargs)` on `world_size` simulated ranks; return their results.

    Every rank is a thread of this process; one runs at a time, in a deterministic
    order, each with its own virtual clock (see the module doc). Torch ops run on
    one CPU thread during the run (torch.set_num_threads(1), restored after).

    Args:
        fn: the rank code; receives its world Group first.
        world_size: number of ranks p >= 1 (a thousand and more is fine).
        network: the simulated network (default SimNetwork()).
        collectives: allow the provided collectives (HW1 switches them off).
        trace: record an event per op (switch off for long runs: it costs memory).

    Returns:
        RunResult: values (index = world rank), counters, events, sim_time (the largest
        rank clock), wall_time.

    Raises:
        RankError: a rank raised (its rank, exception and traceback); on a deadlock,
            the lowest blocked rank, whose cause is a DeadlockError with the report.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"run_sim: world_size must be an int >= 1, got {world_size!r}")
    kwargs = {} if kwargs is None else kwargs
    network = SimNetwork() if network is None else network
    wall_start = time.perf_counter()
    sched = Scheduler(world_size, network)
    world = tuple(range(world_size))
    groups, recorders = [], [Recorder(r, trace=trace) for r in world]
    for r in world:
        ctx = RankContext(world_rank=r, world_size=world_size, deadline=None,
                          collectives=collectives, recorder=recorders[r],
                          tracker=SimTracker(sched, r))
        groups.append(Group(SimBackend(sched, r, world, "world"), ctx))
    values = [None] * world_size
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)               # else each rank thread would start its own OpenMP pool
    try:
        threads = _start_threads(sched, fn, groups, args, kwargs, values)
        try:
            sched.start()
            sched.wait_done()
        finally:
            for t in threads:
                t.join()
    finally:
        torch.set_num_threads(torch_threads)
    wall_time = time.perf_counter() - wall_start
    if sched.failures:
        raise _rank_error(sched) from None
    return _SimResult(values, [g.counters for g in groups], recorders if trace else None,
                      wall_time=wall_time, sim_time=max(s.clock for s in sched.slots))


class _SimResult(RunResult):
    """run_sim's RunResult: its `events` are made from the ranks' recorders when first read.

    A traced run of two million messages records them as tuples (observe/trace.py); making
    the Event objects and sorting them costs ~2 s more, which a run nobody reads the trace
    of does not pay. The events, once read, are those RunResult would hold (merged_events)."""

    def __init__(self, values, counters, recorders, **kwargs):
        super().__init__(values, counters, [], backend="sim", **kwargs)
        self._recorders = recorders

    @property
    def events(self) -> list[Event]:
        if self._recorders is not None:
            self._events, self._recorders = merged_events(self._recorders), None
        return self._events

    @events.setter
    def events(self, events: list[Event]) -> None:
        self._events, self._recorders = events, None

    def __getstate__(self):
        self.events                         # a copy or pickle holds the events, not the recorders
        return self.__dict__


def _rank_main(sched: Scheduler, rank: int, fn, group: Group, args, kwargs, values: list) -> None:
    sched.slots[rank].lock.acquire()       # wait for the baton
    if sched.cancelled:
        return
    try:
        values[rank] = fn(group, *args, **kwargs)
    except BaseException as exc:           # noqa: BLE001 - reported in the caller as RankError
        sched.finish(rank, exc)
    else:
        sched.finish(rank, None)


def _start_threads(sched: Scheduler, fn, groups, args, kwargs, values) -> list[threading.Thread]:
    """One small-stack thread per rank, each asleep until it gets the baton."""
    threads = []
    old = threading.stack_size(STACK_SIZE)
    try:
        for r, group in enumerate(groups):
            t = threading.Thread(target=_rank_main, args=(sched, r, fn, group, args, kwargs, values),
                                 name=f"sim-rank-{r}", daemon=True)
            t.start()
            threads.append(t)
    except BaseException as exc:
        sched.cancelled = True
        for t, slot in zip(threads, sched.slots):
            slot.lock.release()
            t.join()
        raise LaunchError(f"run_sim: could not start thread {len(threads)} of {len(groups)} "
                          f"({type(exc).__name__}: {exc}). What to do: use fewer ranks, or raise "
                          f"the limit on threads (ulimit -u).") from exc
    finally:
        threading.stack_size(old)
    return threads


def _rank_error(sched: Scheduler) -> RankError:
    """RankError for the root-cause rank: the rank that stopped the run, else the first failure
    that is not a PeerFailedError."""
    slots = sched.slots
    failed = sched.failures
    root = sched.root_rank if sched.root_rank in failed else None
    if root is None:
        root = next((r for r in failed if not isinstance(slots[r].exc, PeerFailedError)), failed[0])
    exc = slots[root].exc
    tb = user_traceback(exc)                     # the rank code's frames, as on gloo and mpi
    others = [r for r in failed if r != root]
    lines = [f"rank {r}: {type(slots[r].exc).__name__}" for r in others[:8]]
    if len(others) > 8:
        lines.append(f"... and {len(others) - 8} more ranks failed")
    message = str(exc).strip() or "(no message)"
    return RankError(root, sched.world_size, type(exc).__name__, message, tb, cause=exc,
                     others="\n".join(lines))
