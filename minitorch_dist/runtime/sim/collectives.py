"""Native ("provided") collectives on the sim backend: computed at once, timed by the cost model.

The k-th collective call of a group on every member is one collective. When the
last member enters it, the result is computed directly (reductions in rank order,
like a sequential reference) and every member's clock becomes
    max(entry clocks) + cost,
with the cost from minitorch_dist/cost_model/collectives.py:
    all_reduce      ring_all_reduce(p, n)       n = bytes of the tensor
    all_gather      ring_all_gather(p, n)       n = bytes of the gathered result
    reduce_scatter  ring_reduce_scatter(p, n)   n = bytes of the input
    broadcast       binomial_broadcast(p, n)    n = bytes of the tensor
    barrier         dissemination_barrier(p)
Native collectives do not book the network ports (p2p.py): a point-to-point
message that overlaps one is not slowed down by it.
"""

from __future__ import annotations

import torch

from ...cost_model import collectives as cost_model
from ..backend import Work
from ..errors import MessageMismatchError


class CollectiveWork(Work):
    """One member's part of a collective; `end` is None until every member has entered."""

    __slots__ = ("backend", "kind", "call", "end", "error", "waiter")

    def __init__(self, backend, kind: str):
        self.backend, self.kind = backend, kind
        self.call = backend.collective_calls
        self.end = None
        self.error = None
        self.waiter = None

    def wait(self, timeout: float | None) -> None:
        self.backend.scheduler.wait(self.backend.me, self)

    def describe(self) -> tuple[str, tuple[int, ...], str]:
        """(op text, world ranks it waits for, collective key) for deadlock reports."""
        key = f"{self.backend.key}#{self.call}"
        return f"{self.kind}(group={self.backend.key}, call #{self.call})", self.backend.world_ranks, key


class _Entry:
    __slots__ = ("work", "tensor", "out", "op", "clock")

    def __init__(self, work, tensor, out, op, clock):
        self.work, self.tensor, self.out, self.op, self.clock = work, tensor, out, op, clock


def enter(backend, kind: str, tensor: torch.Tensor | None = None, out: torch.Tensor | None = None,
          op=None) -> CollectiveWork:
    """Rank `backend.rank` enters its next collective of `backend`'s group.

    `op` is the reduce op (all_reduce, reduce_scatter) or the root (broadcast).
    """
    sched = backend.scheduler
    backend.collective_calls += 1
    key = (backend.key, backend.collective_calls)
    pending = sched.collectives.get(key)
    if pending is None:
        pending = sched.collectives[key] = [backend.size, [None] * backend.size]  # [missing, entries]
    work = CollectiveWork(backend, kind)
    pending[1][backend.rank] = _Entry(work, tensor, out, op, sched.slots[backend.me].clock)
    pending[0] -= 1
    if pending[0] == 0:                        # the last member is in: compute it now
        del sched.collectives[key]
        _complete(backend, kind, pending[1])
    return work


def _complete(backend, kind: str, entries: list[_Entry]) -> None:
    sched = backend.scheduler
    start = max(e.clock for e in entries)
    problem = _mismatch(backend, entries)
    cost = 0.0
    if problem is None:
        cost = _compute(kind, entries, sched.network)
    for e in entries:
        e.work.end = start + cost
        if problem is not None:            # one exception object per rank: each gets its traceback
            e.work.error = MessageMismatchError(problem)
        sched.wake(e.work.waiter, e.work.end)


def _key(e: _Entry) -> tuple:
    if e.tensor is None:
        return (e.work.kind,)
    return (e.work.kind, e.op, e.tensor.dtype, tuple(e.tensor.shape))


def _signature(e: _Entry) -> str:
    kind = e.work.kind
    if e.tensor is None:
        return f"{kind}()"
    what = f"{str(e.tensor.dtype).replace('torch.', '')} of shape {tuple(e.tensor.shape)}"
    arg = "" if e.op is None else (f"src={e.op}, " if kind == "broadcast" else f"op={e.op!r}, ")
    return f"{kind}({arg}{what})"


def _mismatch(backend, entries: list[_Entry]) -> str | None:
    """The error text when the members called different collectives, ops, dtypes or shapes."""
    first = _key(entries[0])
    if all(_key(e) == first for e in entries):
        return None
    by_sig: dict[str, list[int]] = {}
    for r, e in enumerate(entries):
        by_sig.setdefault(_signature(e), []).append(r)
    parts = [f"ranks {ranks} called {sig}" for sig, ranks in by_sig.items()]
    return (
        f"collective call #{backend.collective_calls} of group {backend.key}: the members disagree: "
        + "; ".join(parts) + ". What to do: every rank of a group must make the same collective "
        "calls in the same order, with the same op, dtype and shape.")


def _reduce(tensors: list[torch.Tensor], op: str) -> torch.Tensor:
    """The reduction over ranks, applied in rank order: ((t0 op t1) op t2) ..."""
    acc = tensors[0].detach().clone()
    for t in tensors[1:]:
        if op == "sum":
            acc.add_(t)
        elif op == "prod":
            acc.mul_(t)
        elif op == "max":
            torch.maximum(acc, t, out=acc)
        else:
            torch.minimum(acc, t, out=acc)
    return acc


def _compute(kind: str, entries: list[_Entry], net) -> float:
    """Write every member's result; return the simulated cost from cost_model."""
    p = len(entries)
    if kind == "barrier":
        return cost_model.dissemination_barrier(p, net.alpha)
    tensors = [e.tensor for e in entries]
    n_bytes = tensors[0].numel() * tensors[0].element_size()
    if kind == "all_reduce":
        acc = _reduce(tensors, entries[0].op)
        for t in tensors:
            t.detach().copy_(acc)
        return cost_model.ring_all_reduce(p, n_bytes, net.alpha, net.beta)
    if kind == "all_gather":
        gathered = torch.cat([t.detach() for t in tensors])          # (p*m, ...)
        for e in entries:
            e.out.detach().copy_(gathered)
        return cost_model.ring_all_gather(p, p * n_bytes, net.alpha, net.beta)
    if kind == "reduce_scatter":
        acc = _reduce(tensors, entries[0].op)                        # (p*m, ...)
        m = acc.shape[0] // p
        for r, e in enumerate(entries):
            e.out.detach().copy_(acc[r * m:(r + 1) * m])
        return cost_model.ring_reduce_scatter(p, n_bytes, net.alpha, net.beta)
    if kind == "broadcast":
        root = tensors[entries[0].op]
        for r, t in enumerate(tensors):
            if r != entries[0].op:
                t.detach().copy_(root)
        return cost_model.binomial_broadcast(p, n_bytes, net.alpha, net.beta)
    raise ValueError(f"unknown collective {kind!r}")
