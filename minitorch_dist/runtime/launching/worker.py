"""A rank process of a local job: connects to its launcher, builds the world group once,
then runs the functions it is sent until told to stop.

Started by pool.py, either forked from the caller (fast: torch is already imported)
or as `mpiexec -n N python -m minitorch_dist.runtime.launching.worker ADDRESS` for the mpi
backend. It never outlives its launcher: a thread reads the launcher's connection
and ends the process the moment it closes.
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import sys
import threading
from dataclasses import dataclass

import cloudpickle
import torch

from ..backends import world_backend
from ..errors import DeadlockError, PeerFailedError, user_traceback
from ..group import Group, RankContext
from ..observe.deadlock import FAILED, FINISHED, RUNNING
from ..observe.trace import Recorder
from ..observe.tracker import BoardTracker
from . import channel, isolation, plain, pmi_relay     # (isolation here: each forked rank imported it, ~3 ms each)
from .host_link import extend_path
from .stores import store_client


@dataclass
class Task:
    """One launch() call, as sent to every rank."""

    run_id: str
    payload: bytes            # cloudpickle of (fn, args, kwargs)
    deadline: float | None
    collectives: bool
    trace: bool
    t0: float
    sys_path: tuple = ()      # the caller's sys.path: functions pickled by reference import from it
    plain: bool = False       # the caller reads replies as plain data only (a rank host: host.py)
    rank_payload: bytes | None = None   # cloudpickle of this rank's own extra args (launch's rank_args)


def failure(rank: int, exc: BaseException, plain_only: bool = False) -> dict:
    """What the caller needs to report a failed rank (the exception itself only if it pickles;
    with plain_only, only if it is a plain record: the caller does not unpickle)."""
    if plain_only:
        blob = exc if plain.record_name(type(exc)) is not None else None
    else:
        try:
            blob = cloudpickle.dumps(exc)
            pickle.loads(blob)
        except Exception:  # noqa: BLE001 - an unpicklable exception still gets reported as text
            blob = None
    return {"rank": rank, "exc_type": type(exc).__name__, "message": pmi_relay.explain(str(exc)),
            "traceback": user_traceback(exc), "exc": blob,
            "secondary": isinstance(exc, PeerFailedError)}


def run_task(task: Task, backend, store, world_rank: int, world_size: int, tracker_factory) -> tuple:
    """Run one task on this rank: ("ok", value, counters, events) or ("error", failure dict)."""
    ctx = RankContext(world_rank, world_size, deadline=task.deadline, collectives=task.collectives,
                      recorder=Recorder(world_rank, task.trace), t0=task.t0, run_id=task.run_id,
                      tracker=tracker_factory(task.run_id))
    ctx.tracker.set_status(RUNNING)
    extend_path(task.sys_path)              # spawned and mpiexec ranks did not inherit it
    try:
        fn, args, kwargs = cloudpickle.loads(task.payload)
        if task.rank_payload is not None:
            args = tuple(args) + tuple(cloudpickle.loads(task.rank_payload))
        value = fn(Group(backend, ctx), *args, **kwargs)
        for sub in reversed(ctx.subgroups):     # collective: every member reaches this point
            sub.close()
        ctx.tracker.set_status(FINISHED, "returned")
        return ("ok", value, ctx.recorder.counters, ctx.recorder.events)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
        try:
            if not isinstance(exc, (DeadlockError, PeerFailedError)):   # stays shown in its op
                ctx.tracker.set_status(FAILED, f"{type(exc).__name__}: "
                                               f"{str(exc).splitlines()[0][:150] if str(exc) else ''}")
        except Exception:  # noqa: BLE001 - the store may be gone
            pass
        return ("error", failure(world_rank, exc, plain_only=task.plain))
    finally:
        ctx.tracker.close()


class RankStream(io.TextIOBase):
    """sys.stdout/stderr of a rank: whole lines go to the launcher, which prints '[rank r] ...'."""

    def __init__(self, send, name: str):
        self._send, self._name, self._buf = send, name, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        if "\n" in self._buf:
            lines, self._buf = self._buf.rsplit("\n", 1)
            self._send(("out", self._name, lines + "\n"))
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self._send(("out", self._name, self._buf))
            self._buf = ""


def serve(rank: int, world_size: int, address, authkey: bytes, spec: dict) -> None:
    """The worker's life: connect, build the world backend, run tasks until 'stop' or EOF.

    The connection to the launcher is made by a thread while this one builds the world group:
    neither waits for the other (the launcher takes its ranks' handshakes one at a time)."""
    torch.set_num_threads(spec.get("threads", 1))   # also what makes fork after OpenMP safe
    link: dict = {}
    linked = threading.Event()
    send_lock = threading.Lock()
    tasks: queue.Queue = queue.Queue()

    encode = channel.send_plain if spec.get("plain") else channel.send

    def send(msg) -> None:
        with send_lock:
            encode(link["conn"], msg)

    def attach_and_read() -> None:
        try:
            link["conn"] = channel.connect(address, authkey)
            send(("hello", rank, os.getpid()))
        except BaseException:  # noqa: BLE001 - no launcher to serve: say why, and end the process
            import traceback
            traceback.print_exc()
            os._exit(3)
        linked.set()
        try:
            while True:
                tasks.put(channel.recv(link["conn"]))
        except (EOFError, OSError):
            os._exit(3)          # the launcher is gone: never leave an orphan behind

    threading.Thread(target=attach_and_read, name="minitorch_dist-launcher-link", daemon=True).start()
    backend, store, tracker_factory = make_world(rank, world_size, spec)
    drop_shared()            # an mpi rank: /dev/shm closed once every segment is mapped and unlinked
    pmi_relay.seal()         # ...and its link to mpiexec carries nothing but finalize and abort
    linked.wait()
    conn = link["conn"]
    sys.stdout, sys.stderr = RankStream(send, "stdout"), RankStream(send, "stderr")
    send(("ready", rank))
    while True:
        msg = tasks.get()
        if msg[0] == "stop":
            break
        task: Task = msg[1]
        reply = run_task(task, backend, store, rank, world_size, tracker_factory)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            send(("reply", task.run_id) + reply)
        except Exception as exc:  # noqa: BLE001 - e.g. a return value that cannot be pickled
            send(("reply", task.run_id, "error", failure(rank, plain_only=task.plain, exc=TypeError(
                f"rank {rank}: the function's return value could not be sent back to the caller "
                f"({type(exc).__name__}: {exc}); return tensors, numbers, lists or dicts"))))
    getattr(backend, "close_at_exit", backend.close)()
    conn.close()


def make_world(rank: int, world_size: int, spec: dict):
    """In a worker: (world backend, store, tracker factory) for the kind of job in `spec`."""
    # one after the other: two threads making TCPStore clients at once have hung a rank
    store = store_client(spec["store_host"], spec["store_port"], world_size)
    board = store_client(spec["store_host"], spec["store_port"], world_size)     # the deadlock board's own
    backend = world_backend(spec["backend"], store, rank, world_size, f"{spec['pool_id']}/world",
                            spec.get("device"))

    def tracker(run_id: str) -> BoardTracker:
        return BoardTracker(board, rank, world_size, prefix=run_id)
    return backend, store, tracker


def isolate(keep: tuple[int, ...] = (), shared: tuple[str, ...] = ()) -> None:
    """In a grading (isolation.VAR set), a Landlock domain of this rank's own before any code under
    test runs; a rank that cannot get one ends here, never running that code unconfined. `keep`:
    inherited descriptors the rank needs (all others are closed); `shared`: folders it writes beside
    its siblings (isolation.isolate_rank)."""
    if isolation.wanted():
        _or_end(lambda: isolation.isolate_rank(keep, shared))


def drop_shared() -> None:
    """In a grading, once the world backend is built: the folders isolate() let this rank write beside
    its siblings (an mpi rank's /dev/shm) closed by a domain inside its own (isolation.drop_shared)."""
    if isolation.wanted():
        _or_end(isolation.drop_shared)


def isolate_sim_process(keep: tuple[int, ...]) -> None:
    """A sim engine or sim rank process in a grading (sim/processes.py): isolate(), and, Landlock or not,
    every descriptor but `keep` closed and the process not dumpable, so no rank can trace, read or write
    the engine or a sibling, nor write to the engine's link to the launcher."""
    isolate(keep)
    if isolation.engine_wanted():
        _or_end(lambda: (isolation.close_inherited(keep), isolation.undumpable()))


def _or_end(confine) -> None:
    """Run `confine`; if the kernel refuses it, say so and end this process before any code under test."""
    try:
        confine()
    except OSError as exc:
        print(f"rank isolation failed: {exc}", file=sys.stderr, flush=True)
        os._exit(3)


def forked_main(rank: int, world_size: int, address, authkey: bytes, spec: dict) -> None:
    """Entry point of a forked (or spawned) worker."""
    os.setpgrp()        # a Ctrl-C in the terminal reaches the caller, which stops us cleanly
    isolation.die_with_parent()
    isolate()
    serve(rank, world_size, address, authkey, spec)


def _mpi_main() -> None:
    """Entry point under mpiexec: python -m minitorch_dist.runtime.launching.worker HOST PORT SPEC."""
    import json
    pmi = os.environ.get("PMI_FD", "")             # MPI_Init's link to the process manager
    if isolation.wanted():                         # a grading: the link carries MPI_Init only (serve seals it)
        pmi_relay.start()
    # /dev/shm stays writable until the world backend is built: MPICH's init maps every local rank's
    # segment there (serve() then closes it: drop_shared)
    isolate(keep=((int(pmi),) if pmi.isdigit() else ()) + pmi_relay.keep(), shared=("/dev/shm",))
    from ..transports.mpi_progress import _mpi
    MPI = _mpi()
    host, port, spec = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    authkey = bytes.fromhex(os.environ.pop("MINITORCH_DIST_AUTHKEY"))
    serve(MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size(), (host, port), authkey, spec)


if __name__ == "__main__":
    _mpi_main()
