"""launch(fn, world_size): run `fn(group, *args, **kwargs)` on every rank, get every return value.

    results = launch(main, 4)                   # gloo ranks forked from this process
    results = launch(main, 1024, backend="sim")  # threads with a virtual clock
    results = launch(main, 4, backend="mpi")     # ranks started by mpiexec
    results = launch(main, 4, rank_args=[(x0,), (x1,), (x2,), (x3,)])   # rank r: main(group, xr)

Under an outside launcher (mpirun, torchrun, srun, python -m minitorch_dist.run)
the same call runs `fn` on this process's rank only and returns every rank's value
(gathered), so one script works everywhere. Local gloo/mpi ranks stay up between
calls with the same world size and backend, so the next call starts in milliseconds.
"""

from __future__ import annotations

import atexit
import os
import pickle
import sys
import time
import uuid

from multiprocessing.connection import wait

import cloudpickle

from ..backends import backend_info
from ..devices import check_local_job
from ..env import default_deadline
from ..errors import LaunchError, RankError
from ..observe import run_meter
from ..observe.deadlock import format_report
from ..observe.tracker import read_board
from ..results import RunResult
from . import channel, per_rank
from .pool import Pool
from .worker import Task

_pool: Pool | None = None
_GRACE = 0.3   # after a first failure, how long to wait for the other ranks' own reports


def shutdown() -> None:
    """Stop the warm pool of rank processes, if any (also runs at interpreter exit)."""
    global _pool
    if _pool is not None:
        pool, _pool = _pool, None
        pool.stop()


atexit.register(shutdown)


def _get_pool(world_size: int, backend: str, start_method: str | None, fresh: bool, device) -> Pool:
    global _pool
    if _pool is not None and (fresh or not _pool.alive() or _pool.world_size != world_size
                              or _pool.backend != backend or _pool.device != device
                              or _pool.mpi_env not in (None, run_meter.mpi_env())):   # another measurement
        shutdown()
    if _pool is None:
        _pool = Pool(world_size, backend, start_method, device=device)
    return _pool


def _kill_pool() -> None:
    global _pool
    if _pool is not None:
        pool, _pool = _pool, None
        pool.kill()


_PEER_LOST = ("Connection closed by peer", "remote worker crashing", "Connection reset by peer")


def _lost_a_peer(failure: dict) -> bool:
    """A transport error that only says a peer went away (gloo's words for it)."""
    return failure["exc_type"] == "RuntimeError" and any(w in (failure["message"] or "") for w in _PEER_LOST)


def _rank_error(failures: list[dict], world_size: int, notes: dict[int, str], trusted: bool = True) -> RankError:
    """The root cause (first failure that is not a consequence of another) as a RankError.

    Untrusted ranks (a rank host) send their exception as a plain record, never as a pickle.
    """
    primary = [f for f in failures if not f["secondary"]]
    # a rank whose process ended is the cause of its peers' lost connections, whichever was heard first
    root = next((f for f in primary if not _lost_a_peer(f)), primary[0] if primary else failures[0])
    cause = root.get("exc") if isinstance(root.get("exc"), BaseException) else None
    if trusted and isinstance(root.get("exc"), bytes):
        try:
            cause = pickle.loads(root["exc"])
        except Exception:  # noqa: BLE001
            cause = None
    others = [f"rank {f['rank']}: {f['exc_type']}: {f['message'].splitlines()[0] if f['message'] else ''}"
              for f in failures if f is not root]
    others += [f"rank {r}: {text}" for r, text in sorted(notes.items()) if r != root["rank"]]
    err = RankError(root["rank"], world_size, root["exc_type"], root["message"], root["traceback"],
                    cause=cause, others="\n".join(others))
    err.__cause__ = cause
    return err


def _collect(pool: Pool, tasks: list[Task], timeout: float | None) -> list[tuple]:
    """Send tasks[r] to rank r; return their replies, or raise RankError / LaunchError."""
    n, task = pool.world_size, tasks[0]
    for conn, own in zip(pool.conns, tasks):
        channel.send(conn, ("task", own))
    pool.wait_ready()         # a new pool's ranks take their task as soon as their world group is built
    pool.new_run()
    replies: dict[int, tuple] = {}
    failures: list[dict] = []
    started, first_failure = time.monotonic(), None
    rank_of = {id(c): r for r, c in enumerate(pool.conns)}
    while len(replies) < n:
        now = time.monotonic()
        if first_failure is not None and now - first_failure > _GRACE:
            break
        if timeout is not None and now - started > timeout:
            states = format_report("what each rank was doing:",
                                   read_board(pool.store, n, task.run_id), n)
            raise LaunchError(f"the run passed its {timeout:g} s timeout; the ranks were stopped.\n{states}")
        open_conns = [c for r, c in enumerate(pool.conns) if r not in replies]
        for conn in wait(open_conns, timeout=0.1):
            rank = rank_of[id(conn)]
            msg = pool.recv(conn)
            if msg is None:
                lost = rank in pool.casualties              # it lost a peer building the group
                failures.append({"rank": rank, "exc_type": "RankExited", "exc": None, "secondary": lost,
                                 "message": f"the process of rank {rank} {pool.exit_description(rank)} while "
                                            + ("building the process group, after a peer ended" if lost else
                                               "running the function"), "traceback": ""})
                replies[rank] = ("died",)
            elif msg[0] == "out":
                Pool.print_output(rank, msg)
            elif msg[0] == "reply" and msg[1] == task.run_id:
                replies[rank] = msg[2:]
                if msg[2] == "error":
                    failures.append(msg[3])
            if failures and first_failure is None:
                first_failure = time.monotonic()
    if failures:
        notes = {r: "stopped by the launcher after the failure above" for r in range(n) if r not in replies}
        raise _rank_error(failures, n, notes, trusted=not pool.plain)
    return [replies[r] for r in range(n)]


def launch(fn, world_size: int | None = None, *, args=(), kwargs=None, rank_args=None, backend: str | None = None,
           deadline: float | None | str = "default", collectives: bool = True, trace: bool = True,
           network=None, timeout: float | None = None, fresh: bool = False,
           start_method: str | None = None, device: str | None = None) -> RunResult:
    """Run `fn(group, *args, **kwargs)` on `world_size` ranks and return every rank's value.

    Args:
        fn: the rank function; its first argument is the world Group. Functions defined in a
            notebook or in __main__ work (they are shipped by value with cloudpickle).
        world_size: number of ranks (under mpirun/torchrun/srun: must match, or None).
        rank_args: one tuple per rank: rank r calls fn(group, *args, *rank_args[r], **kwargs).
            On gloo, mpi and nccl rank r's process receives only rank_args[r] (pickled apart for
            each rank). On sim every rank is a thread of one process, which holds every rank's
            element; under an outside launcher, every process holds what its script built.
        backend: "gloo" (default; CPU processes), "mpi" (mpiexec) or "sim" (threads, virtual
            clock). MINITORCH_DIST_BACKEND sets the default.
        deadline: seconds a blocking op may wait before a DeadlockError with the wait-for
            report; None waits forever. Default 60 s, or MINITORCH_DIST_DEADLINE.
        collectives: False switches the provided collectives off (they raise).
        trace: record events (counters are always kept).
        network: sim only: a SimNetwork (alpha, beta, ...).
        timeout: wall-clock limit of the whole run (gloo/mpi), for code stuck outside comm ops.
        fresh: start new rank processes even if a warm pool fits.
        start_method: "fork" (Linux default) or "spawn" for local gloo ranks.
        device: "cpu" (default) or "cuda": where each rank computes, as group.device (gloo and
            mpi stage GPU messages through the host; nccl is always on the GPU, one per rank).
            MINITORCH_DIST_DEVICE sets the default.

    Returns:
        RunResult: a list of return values indexed by rank, with .counters, .events,
        .sim_time, .chrome_trace(), .plot_timeline(), .summary().

    Raises:
        RankError: a rank raised (or died); names the rank, carries its traceback, and every
            other rank has been stopped.
    """
    kwargs = dict(kwargs or {})
    if deadline == "default":
        deadline = default_deadline()
    own = None if rank_args is None else per_rank.check(rank_args, world_size)
    from .attach import attached_group, torch_distributed_initialised
    group = attached_group()
    if group is not None:                    # world_group() was called: run on that group
        return group.run(per_rank.appended(fn, own), world_size, args, kwargs)
    if torch_distributed_initialised():
        raise LaunchError(
            "launch() inside a torch.distributed job (init_process_group was called in this process): it "
            "would start a second, local job of its own. Get this process's Group with "
            "group = minitorch_dist.world_group() and call fn(group) on every rank (or launch(fn) after "
            "world_group(): it then runs fn on that group)")
    from ..env import detect_external
    job = detect_external()
    if job is not None:
        from .external import run_external
        return run_external(per_rank.appended(fn, own), world_size, job, args, kwargs, backend, deadline,
                            collectives, trace, device or os.environ.get("MINITORCH_DIST_DEVICE"))
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise LaunchError(f"launch: world_size must be a positive int, got {world_size!r}")
    backend = backend or os.environ.get("MINITORCH_DIST_BACKEND", "gloo")
    if backend_info(backend).starts == "threads":
        if device not in (None, "cpu"):
            raise LaunchError(f"launch(backend={backend!r}, device={device!r}): the simulator runs on the CPU; "
                              f"device= is for gloo, mpi and nccl")
        from .host_link import host_address, run_sim_on_host
        if host_address():            # untrusted rank code: the whole sim runs in the rank host
            return run_sim_on_host(host_address(), fn, world_size, args, kwargs,
                                   {"network": network, "collectives": collectives, "trace": trace}, own)
        fn = per_rank.appended(fn, own)      # threads of one process: each rank picks its own element
        from ..sim.network import run_sim
        return run_sim(fn, world_size, args, kwargs, network=network, collectives=collectives, trace=trace)
    if network is not None:
        raise LaunchError("launch: network= is for backend='sim' only")
    payload = cloudpickle.dumps((fn, tuple(args), kwargs))
    started = time.perf_counter()
    device = device or os.environ.get("MINITORCH_DIST_DEVICE")
    if check_local_job(backend, device, world_size) and start_method is None:
        start_method = "spawn"        # CUDA does not survive a fork of a process that touched it
    pool = _get_pool(world_size, backend, start_method, fresh, device)
    task = Task(uuid.uuid4().hex[:12], payload, deadline, collectives, trace, time.perf_counter(),
                tuple(sys.path), plain=pool.plain)
    meter = None
    try:
        if run_meter.wanted(backend):
            pool.wait_ready()     # the ranks' connections to each other exist before the meter's first count
            meter = run_meter.for_pool(pool.conns, bool(pool.host), pool.store.port)
        replies = _collect(pool, per_rank.tasks(task, own, world_size), timeout)
    except BaseException:          # a failure, KeyboardInterrupt, a timeout: no rank survives it
        _kill_pool()
        raise
    values = [r[1] for r in replies]
    counters = [r[2] for r in replies]
    events = [e for r in replies for e in r[3]]
    wire = meter.done() if meter is not None else None
    _drop_pool_if_unmatched(counters)
    result = RunResult(values, counters, events, backend, time.perf_counter() - started, wire=wire)
    result.wire_unseen = meter.unseen if meter is not None else None
    return result


def _drop_pool_if_unmatched(counters) -> None:
    """Restart the warm ranks when a run left a message or a posted receive unmatched.

    A send nobody received (or a receive nobody sent to) stays in the transport and would be
    matched by the next run on the same warm ranks, so those ranks are dropped and the next
    launch() starts fresh ones.
    """
    sent = sum(c.messages_sent for c in counters)
    received = sum(c.messages_recv for c in counters)
    if sent != received:
        import warnings
        _kill_pool()
        warnings.warn(f"launch: the ranks sent {sent} messages but received {received}: a send without its "
                      f"receive (or the reverse) was left over when the function returned. The rank processes "
                      f"were restarted so that it cannot reach the next run; check that every send has a "
                      f"matching recv and every isend/irecv handle is waited on.", RuntimeWarning, stacklevel=3)
