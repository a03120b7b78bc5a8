"""A sim run whose ranks are processes and whose clock lives where their code cannot write it.

    reply = run_on_processes(payload, sys_path, meta, out)   # in the sim process a grading forks

On the thread sim every rank is a thread of one process: rank code can move the virtual clock,
rewrite the counters and the trace, and read every rank's data, so a grader cannot believe the
times it reports. Here (gradings, MINITORCH_DIST_SIM_ENGINE=1) each rank is
a process forked from this one, the engine: the rank runs the function under test on a Group
whose backend asks the engine for everything (rank_process.py), and the engine runs run_sim
with one serving thread per rank that performs the rank's requests on that rank's real sim
Group. The scheduler, the clocks, the message queues, the counters and the trace are the
engine's, and the engine never runs, unpickles or imports the code under test: the payload
(function and arguments, cloudpickled by the launcher) is unpickled in the ranks only, and
everything a rank sends is decoded as plain data (launching/plain.py). The engine is undumpable
before it forks (no process of the uid can trace it or open its memory), each rank keeps no
descriptor but its own link to it, and where Landlock answers each rank also has a domain of its
own (launching/worker.py, isolate_sim_process). launch's rank_args come pickled apart (meta["own"]);
each rank keeps its own and empties the list before the code under test runs. compute(seconds)
calls are counted (RunResult.counters: op "compute"), as every operation is.

One rank runs at a time, as on the thread sim: a serving thread holds the baton while its rank
computes, and each request is answered before the rank goes on, so a run is the same sequence
of steps, with the same simulated times, as the thread sim's.
"""

from __future__ import annotations

import os
import select
import socket
import time
from multiprocessing.connection import Connection

import torch

from ..errors import PeerFailedError, RankError
from ..launching import channel
from ..launching.isolation import undumpable
from ..launching.plain import PlainDataError, encode
from .network import SimNetwork, run_sim
from .rank_process import rank_main

MAX_RANKS = 64        # a process per rank: more run on the thread sim


def run_on_processes(payload: bytes, sys_path, meta: dict, out, confine=None) -> tuple:
    """The sim process's reply ("encoded result", values, counters, events, wall, sim time) or ("error",
    RankError, its cause encoded or None) for a run of meta["world_size"] ranks, each a process forked
    here. `out` sends a rank's ("out", stream, text) on to the launcher (one serving thread at a time).
    `confine(fds)`, once the ranks are forked: the engine's own isolation, keeping `fds` (a domain
    made before the forks would hold the ranks' own, and keep each from its own /proc entry); with it,
    the engine is made undumpable before the forks (the ranks are born so, and cannot open its memory)."""
    p = meta["world_size"]
    if confine is not None:             # before the forks: a rank may open /proc/PID/mem before the engine
        undumpable()                    # confines itself, and the check is made at open only
    own = meta.get("own")             # launch's rank_args, each rank's pickled apart, or None
    pairs = [socket.socketpair() for _ in range(p)]
    pids = []
    for r in range(p):
        pid = os.fork()
        if pid == 0:                                     # the rank: its own end of its own pair only
            for i, (mine, theirs) in enumerate(pairs):
                mine.close()
                if i != r:
                    theirs.close()
            extra = None if own is None else own[r]
            if own is not None:          # the one list every copy of the message refers to, emptied: no
                own.clear()              # object in this process leads to another rank's arguments
            rank_main(r, p, pairs[r][1].detach(), payload, sys_path, meta["collectives"], extra)
        pids.append(pid)
    if own is not None:
        own.clear()
    conns = []
    for mine, theirs in pairs:
        theirs.close()
        conns.append(Connection(mine.detach()))
    if confine is not None:
        confine([c.fileno() for c in conns])
    network = SimNetwork(meta["alpha"], meta["beta"], meta["eager_limit"])
    try:
        res = run_sim(lambda group: _serve(group, conns[group.rank], out), p, network=network,
                      collectives=meta["collectives"], trace=meta["trace"])
        return ("encoded result", list(res), res.counters, res.events, res.wall_time, res.sim_time)
    except RankError as err:
        return ("error", *_as_reported(err))
    finally:
        for conn in conns:                # a rank still running gets EOF at its next request...
            conn.close()
        _reap(pids)                       # ...and its parent-death signal when this process ends


def _reap(pids: list[int], grace: float = 1.0) -> None:
    """Wait up to `grace` seconds in all for the ranks to end (the engine may not signal them: they are
    outside its Landlock domain, whose scope keeps signals in), each through a pidfd (ready when the
    process ends; no polling: a 10 ms poll cost ~10 ms a run). Where the kernel has no pidfd, ranks
    not yet ended are left to their parent-death signal."""
    end = time.monotonic() + grace
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            try:
                select.select([fd], [], [], max(0.0, end - time.monotonic()))
            finally:
                os.close(fd)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


class RankFailed(Exception):
    """What the rank's own function raised, as its process reported it (type, message, traceback)."""

    def __init__(self, exc_type: str, message: str, traceback: str, cause: bytes | None = None):
        super().__init__(message)
        self.exc_type, self.message, self.traceback, self.cause = exc_type, message, traceback, cause


def _as_reported(err: RankError) -> tuple:
    """(RankError, cause encoded or None): run_sim's error with the rank's own exception in place of
    RankFailed; the exception itself stays encoded (its class may be one the engine never imports)."""
    failed = err.cause
    if isinstance(failed, RankFailed):
        return (RankError(err.rank, err.world_size, failed.exc_type, failed.message, failed.traceback,
                          others=err.others), failed.cause)
    try:                                 # the engine's own (a runtime error): plain data
        cause = encode(failed)
    except PlainDataError:
        cause = None
    return RankError(err.rank, err.world_size, err.exc_type, err.message, err.remote_traceback,
                     others=err.others), cause


class _Said:
    """The rank's sim Group's tracker, with the text of the op the rank says it waits in (its own
    line of code, which the engine's frames do not show) for the deadlock report."""

    def __init__(self, tracker):
        self._tracker, self.text = tracker, ""

    def begin(self, op, waits_for, collective="", frame=None) -> None:
        self._tracker.begin(self.text or op, waits_for, collective, None if self.text else frame)

    def __getattr__(self, name):
        return getattr(self._tracker, name)


def _serve(group, conn, forward):
    """A serving thread: perform rank `group.rank`'s requests on `group` until it reports its end."""
    groups, works = {0: group}, {}
    said = group._ctx.tracker = _Said(group._ctx.tracker)
    while True:
        try:
            msg = channel.recv_plain(conn)
        except (EOFError, OSError):
            raise RankFailed("RankExited", f"the process of rank {group.rank} ended without reporting a "
                                           f"result (killed, or os._exit)", "") from None
        kind = msg[0]
        if kind == "out":
            forward(msg)
            continue
        if kind == "done":
            return msg[1]
        if kind == "fail":
            raise _failure(*msg[1:])
        try:
            answer = ("ok", _perform(kind, msg[1:], groups, works, said, group))
        except Exception as exc:  # noqa: BLE001 - raised in the rank, as on the thread sim
            answer = ("raise", type(exc).__name__, str(exc))
        channel.send_plain(conn, answer)


def _failure(exc_type: str, message: str, traceback: str, cause) -> BaseException:
    if exc_type == "PeerFailedError":        # not the root cause: run_sim looks past it
        return PeerFailedError(message)
    return RankFailed(exc_type, message, traceback, cause if isinstance(cause, bytes) else None)


def _perform(kind: str, args, groups: dict, works: dict, said: _Said, world):
    """One request of a rank: post an operation (kept under its id), wait for one, or a call."""
    if kind == "wait":
        wid, said.text = args[0], args[1]
        handle, answers = works.pop(wid)
        try:
            result = handle.wait() if handle is not None else None
        finally:
            said.text = ""
        return result if answers else None
    if kind == "now":
        return world.now()
    if kind == "compute":
        world.compute(args[0])
        world._ctx.recorder.count("compute")
        return None
    gid, wid, *rest = args
    group = groups[gid]
    if kind == "sendrecv":                   # posted and waited at once
        tensor, dst, dtype, shape, src, tag, said.text = rest
        try:
            return group.sendrecv(tensor, dst, torch.empty(shape, dtype=dtype), src, tag)
        finally:
            said.text = ""
    if kind == "subgroup":
        ranks, _key = rest
        sub = group.subgroup(ranks)
        groups[wid] = sub
        return sub.rank, list(sub.ranks)
    works[wid] = _post(kind, group, rest)
    return None


def _post(kind: str, group, rest) -> tuple:
    """(handle or None, whether its wait's result goes back to the rank's buffer)."""
    if kind == "isend":
        tensor, dst, tag, op = rest
        return group.isend(tensor, dst, tag, _op=op), False
    if kind == "irecv":
        dtype, shape, src, tag, op = rest
        return group.irecv(torch.empty(shape, dtype=dtype), src, tag, _op=op), True
    if kind == "all_reduce":
        tensor, op = rest
        return group.all_reduce(tensor, op, async_op=True), True
    if kind == "all_gather":
        (tensor,) = rest
        return group.all_gather(tensor, async_op=True), True
    if kind == "reduce_scatter":
        tensor, op = rest
        return group.reduce_scatter(tensor, op, async_op=True), True
    if kind == "broadcast":
        tensor, src = rest
        return group.broadcast(tensor, src, async_op=True), True
    if kind == "barrier":
        group.barrier()
        return None, False
    raise ValueError(f"sim engine: unknown request {kind!r}")
