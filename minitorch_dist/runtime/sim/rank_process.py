"""A sim rank that is a process of its own (processes.py): its Group's backend asks the engine.

The rank runs the code under test with an ordinary Group (the same checks, errors and counters as
on every backend) over RemoteBackend, whose every operation is a request to the engine process
over this rank's socket: the engine performs it on the rank's real sim Group, on the clock and
message queues it alone holds, and answers with plain data (a received tensor, the time, an
error to raise here). One request at a time, each answered before the rank goes on.
"""

from __future__ import annotations

import itertools
import os
import sys

import torch

from ..backend import Backend, Work
from ..checks import caller_line
from ..context import RankContext
from ..errors import (CollectivesDisabledError, DeadlockError, DistError, MessageMismatchError,
                      PeerFailedError)
from ..group import Group
from ..launching import channel
from ..launching.plain import PlainDataError, encode
from ..observe.trace import Recorder
from ..observe.tracker import OpTracker

# errors the engine may answer with, raised here as the same class
ERRORS = {c.__name__: c for c in (DeadlockError, PeerFailedError, MessageMismatchError, CollectivesDisabledError,
                                   DistError, ValueError, TypeError, RuntimeError, IndexError)}


class RankLink:
    """This rank's socket to the engine: call() sends one request and returns its answer."""

    def __init__(self, conn):
        self.conn = conn
        self.ids = itertools.count(1)
        self.waiting = ("", (), "")            # what Group says the rank waits in (deadlock reports)

    def call(self, *request):
        channel.send_plain(self.conn, request)
        answer = channel.recv_plain(self.conn)
        if answer[0] == "ok":
            return answer[1]
        raise ERRORS.get(answer[1], RuntimeError)(answer[2])

    def send(self, msg) -> None:
        channel.send_plain(self.conn, msg)


class LinkTracker(OpTracker):
    """Keeps the text of the op the rank is about to wait in; the wait request carries it."""

    def __init__(self, link: RankLink):
        self._link = link

    def begin(self, op, waits_for, collective="", frame=None) -> None:
        self._link.waiting = (self.op_text(op, frame), tuple(waits_for), collective)

    def end(self) -> None:
        self._link.waiting = ("", (), "")


class RemoteWork(Work):
    """An operation the engine holds; `into` gets what it answers when the operation is done."""

    def __init__(self, link: RankLink, wid: int, into: torch.Tensor | None):
        self.link, self.wid, self.into, self.done = link, wid, into, False

    def finish_now(self) -> bool:
        return self.done                       # the engine answers only a wait

    def wait(self, timeout) -> None:
        if not self.done:
            self._fill(self.link.call("wait", self.wid, *self.link.waiting))

    def _fill(self, data) -> None:
        self.done = True
        if self.into is not None and data is not None:
            self.into.copy_(data)


class RemoteBackend(Backend):
    """A group's backend in a rank process: every operation is performed by the engine."""

    name = "sim"

    def __init__(self, link: RankLink, gid: int, rank: int, world_ranks: tuple[int, ...]):
        self.link, self.gid, self.rank = link, gid, rank
        self.world_ranks, self.size = tuple(world_ranks), len(world_ranks)
        self.device = torch.device("cpu")

    def _post(self, kind: str, into, *args) -> RemoteWork:
        wid = next(self.link.ids)
        self.link.call(kind, self.gid, wid, *args)
        return RemoteWork(self.link, wid, into)

    def isend(self, tensor, dst, tag, op):
        return self._post("isend", None, tensor, dst, tag, op)

    def irecv(self, tensor, src, tag, op):
        return self._post("irecv", tensor, tensor.dtype, list(tensor.shape), src, tag, op)

    def sendrecv(self, send_tensor, dst, recv_tensor, src, tag, site):
        """The whole exchange in one request (the engine's Group.sendrecv: its one trace event)."""
        payload, ranks = send_tensor.contiguous(), self.world_ranks
        site.recorder.count("sendrecv", sent=1, recv=1, bytes_sent=payload.nbytes, bytes_recv=recv_tensor.nbytes)
        text = f"sendrecv(dst={ranks[dst]}, src={ranks[src]}, tag={tag}) {caller_line()}".rstrip()
        got = self.link.call("sendrecv", self.gid, 0, payload, dst, recv_tensor.dtype, list(recv_tensor.shape),
                             src, tag, text)
        return recv_tensor.copy_(got)

    def all_reduce(self, tensor, op):
        return self._post("all_reduce", tensor, tensor, op)

    def all_gather(self, out, tensor):
        return self._post("all_gather", out, tensor)

    def reduce_scatter(self, out, tensor, op):
        return self._post("reduce_scatter", out, tensor, op)

    def broadcast(self, tensor, src):
        return self._post("broadcast", tensor, tensor, src)

    def barrier(self):
        return self._post("barrier", None)

    def subgroup(self, ranks, key):
        gid = next(self.link.ids)
        rank, world = self.link.call("subgroup", self.gid, gid, list(ranks), key)
        return RemoteBackend(self.link, gid, rank, tuple(world))

    @classmethod
    def world(cls, store, rank, size, key, device=None):
        raise NotImplementedError("a sim rank's world group is made by the engine (processes.py)")

    def now(self) -> float:
        return self.link.call("now")

    def compute(self, seconds: float) -> None:
        self.link.call("compute", float(seconds))

    def close(self) -> None:
        pass


def _cause(exc: BaseException) -> bytes | None:
    try:
        return encode(exc)
    except PlainDataError:
        return None


def rank_main(rank: int, world_size: int, fd: int, payload: bytes, sys_path, collectives: bool,
              own: bytes | None = None) -> None:
    """A rank process: run the function under test on a Group over RemoteBackend, then send the engine
    ("done", value) or ("fail", exception type, message, traceback). Never returns. `own`: this rank's
    own arguments (launch's rank_args[rank], pickled), passed after the shared ones."""
    from multiprocessing.connection import Connection

    import cloudpickle

    from ..errors import user_traceback
    from ..launching.host_link import extend_path
    from ..launching.isolation import die_with_parent
    from ..launching.worker import RankStream, isolate_sim_process
    code = 0
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__   # not the engine's streams to the launcher
    try:
        die_with_parent()
        isolate_sim_process((fd,))             # in a grading: its own link only; its own Landlock domain
        link = RankLink(Connection(fd))
        sys.stdout, sys.stderr = RankStream(link.send, "stdout"), RankStream(link.send, "stderr")
        extend_path(sys_path)
        fn, _, args, kwargs, _ = cloudpickle.loads(payload)
        args = (*args, *(cloudpickle.loads(own) if own is not None else ()))
        ctx = RankContext(world_rank=rank, world_size=world_size, deadline=None, collectives=collectives,
                          recorder=Recorder(rank, trace=False), tracker=LinkTracker(link))
        group = Group(RemoteBackend(link, 0, rank, tuple(range(world_size))), ctx)
        try:                # value and exception encoded here: the launcher decodes them, never the engine
            value = fn(group, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the engine reports it as this rank's failure
            msg = ("fail", type(exc).__name__, str(exc).strip() or "(no message)", user_traceback(exc), _cause(exc))
        else:
            try:
                msg = ("done", encode(value))
            except PlainDataError as exc:
                msg = ("fail", "TypeError", f"rank {rank}: the function's return value could not be sent back "
                                            f"({exc}); return tensors, numbers, lists or dicts", "", None)
        sys.stdout.flush()
        sys.stderr.flush()
        link.send(msg)
    except BaseException:  # noqa: BLE001 - the engine sees the socket close
        code = 70
    finally:
        os._exit(code)
