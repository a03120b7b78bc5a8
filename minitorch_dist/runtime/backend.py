"""The contract between a Group and the transport behind it (gloo, mpi, sim; backends.py lists them).

A Backend moves whole tensors between the ranks of one group. It knows nothing
about counters, traces or deadlock reports: the Group adds those, once, for every
backend. Ranks given to a Backend are ranks *of that group* (0..size-1).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, NamedTuple

import torch

REDUCE_OPS = ("sum", "prod", "max", "min")


class DeadlineExpired(Exception):
    """Internal: a Work did not finish within the time it was given. The Group turns
    this into a DeadlockError with the report of every rank's state."""


class Work(ABC):
    """A posted operation. `wait` blocks until it is done."""

    @abstractmethod
    def wait(self, timeout: float | None) -> None:
        """Block until done. Raise DeadlineExpired after `timeout` seconds (None: no limit).

        After DeadlineExpired the backend may be unusable: the caller treats it as fatal.
        """

    def finish_now(self) -> bool:
        """Complete the work if that needs no waiting, and say so (sim: it is already done).

        True lets the Group skip the bookkeeping of a blocking wait (deadlock tracking).
        Real backends cannot know without waiting: False.
        """
        return False


class DoneWork(Work):
    """A Work that is already complete (size-1 groups, zero-size collectives)."""

    def wait(self, timeout: float | None) -> None:
        return None


class SendrecvSite(NamedTuple):
    """What a Backend.sendrecv needs of the Group that calls it (made once per Group)."""
    recorder: object    # the rank's Recorder (observe/trace.py): counters and events
    wait: Callable      # Group._wait(work, op_text, waits_for): a blocking wait with deadlock tracking
    name: str           # the group's name, for trace events


class Backend(ABC):
    """Transport for one group of ranks. Tensors may live on any device the backend supports."""

    name: str = "?"
    device: torch.device = torch.device("cpu")   # where this rank computes (group.device)
    rank: int          # this process's rank in the group
    size: int          # number of ranks in the group
    world_ranks: tuple[int, ...]  # world rank of each group rank

    # -- point to point ---------------------------------------------------------
    @abstractmethod
    def isend(self, tensor: torch.Tensor, dst: int, tag: int, op: str) -> Work:
        """Post a send of `tensor` (contiguous, any dtype/shape, maybe empty) to group rank `dst`.

        `op` names the user-facing call ("send", "isend", "sendrecv") for error messages.
        The caller must not modify `tensor` until the Work is waited.
        """

    @abstractmethod
    def irecv(self, tensor: torch.Tensor, src: int, tag: int, op: str) -> Work:
        """Post a receive into `tensor` from group rank `src`.

        The Work's wait raises MessageMismatchError when the message's dtype or shape
        differs from `tensor`'s, naming both ranks, both shapes and both ops.
        """

    # -- native collectives (the "provided" ones) --------------------------------
    @abstractmethod
    def all_reduce(self, tensor: torch.Tensor, op: str) -> Work:
        """In place: every rank's `tensor` becomes the reduction over ranks. op in REDUCE_OPS."""

    @abstractmethod
    def all_gather(self, out: torch.Tensor, tensor: torch.Tensor) -> Work:
        """out (p*m, ...) gets rank r's `tensor` (m, ...) at rows [r*m, (r+1)*m)."""

    @abstractmethod
    def reduce_scatter(self, out: torch.Tensor, tensor: torch.Tensor, op: str) -> Work:
        """out (m, ...) on rank r gets the reduction over ranks of rows [r*m, (r+1)*m) of `tensor`."""

    @abstractmethod
    def broadcast(self, tensor: torch.Tensor, src: int) -> Work:
        """In place: every rank's `tensor` becomes group rank `src`'s."""

    @abstractmethod
    def barrier(self) -> Work:
        """Completes once every rank of the group has entered the barrier."""

    def sendrecv(self, send_tensor: torch.Tensor, dst: int, recv_tensor: torch.Tensor, src: int, tag: int,
                 site: "SendrecvSite") -> torch.Tensor | None:
        """A whole Group.sendrecv in one call, for a backend that can do it faster than isend + irecv.

        Called with checked arguments; returns recv_tensor, or None when the backend has no
        such path (the Group then posts irecv and isend). It must count, wait and trace as the
        Group would, through `site`.
        """
        return None

    def bind_sendrecv(self, group) -> Callable | None:
        """A faster Group.sendrecv for `group` (set as its attribute), or None: the method stays."""
        return None

    # -- groups and time --------------------------------------------------------
    @abstractmethod
    def subgroup(self, ranks: tuple[int, ...], key: str) -> "Backend":
        """A backend for the group ranks `ranks` (sorted, includes self.rank).

        Called by the members only. `key` is the same string on every member and
        unique per sub-group creation, for rendezvous.
        """

    @classmethod
    def world(cls, store, rank: int, size: int, key: str, device=None) -> "Backend":
        """The world group's backend in one rank process of a job whose processes share `store`
        (a c10d TCPStore). `key` is unique per job; `device` is the run's device= (devices.py).
        Backends whose ranks are not such processes (sim) do not have one."""
        raise NotImplementedError(f"backend {cls.name!r} does not run as a job of processes")

    def now(self) -> float | None:
        """Simulated seconds since the start of the run, or None on real backends."""
        return None

    def compute(self, seconds: float) -> None:
        """Charge `seconds` of local computation (advances the clock on sim; no-op elsewhere)."""
        return None

    def close(self) -> None:
        """Release what the backend holds (sockets, communicators)."""
        return None
