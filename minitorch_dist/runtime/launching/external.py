"""launch() inside a job started by mpirun, torchrun, srun or `python -m minitorch_dist.run`.

This process is one rank: it builds the world group once (kept for later launch()
calls in the same script), runs `fn` here, and gathers every rank's return value,
counters and events so that the caller sees the same RunResult as a local launch.
An exception is printed with its rank; under mpirun it aborts the whole job
(MPI_Abort) so no other rank hangs; elsewhere the process exits non-zero and the
launcher stops the others.
"""

from __future__ import annotations

import atexit
import datetime
import itertools
import os
import pickle
import socket
import sys
import time

import cloudpickle
import torch
import torch.distributed as dist

from ..backends import backend_info, process_backends, world_backend
from ..env import ExternalJob
from ..errors import LaunchError, RankError
from ..observe.tracker import BoardTracker
from ..results import RunResult
from .worker import Task, run_task

_world: dict = {}            # the job's world backend and store, built on first use
_runs = itertools.count()


def _store(job: ExternalJob, comm=None):
    """The job's TCPStore client: hosted by the launcher, by rank 0, or (mpirun) by rank 0 on a free port."""
    timeout = datetime.timedelta(seconds=300)
    if comm is None:
        is_host = job.rank == 0 and not job.store_hosted
        return dist.TCPStore(job.master_addr, job.master_port, job.world_size, is_host, timeout=timeout,
                             wait_for_workers=False)
    host_store = None
    if job.rank == 0:
        host_store = dist.TCPStore("0.0.0.0", 0, job.world_size, True, timeout=timeout, wait_for_workers=False)
        address = (socket.gethostname(), host_store.port)
    else:
        address = None
    address = comm.bcast(address, root=0)
    hosts = comm.allgather(socket.gethostname())
    host = "127.0.0.1" if len(set(hosts)) == 1 else address[0]
    return host_store or dist.TCPStore(host, address[1], job.world_size, False, timeout=timeout)


def default_backend(job: ExternalJob) -> str:
    """MINITORCH_DIST_BACKEND (python -m minitorch_dist.run --backend sets it), else mpi under
    mpirun and gloo elsewhere."""
    return os.environ.get("MINITORCH_DIST_BACKEND") or ("mpi" if job.launcher == "mpirun" else "gloo")


def world_for(job: ExternalJob, backend: str, device=None):
    """The job's world backend and store, built on first use (one backend per job)."""
    starts = backend_info(backend).starts
    if starts == "mpiexec" and job.launcher != "mpirun":
        raise LaunchError(f"backend={backend!r} needs mpirun/mpiexec, but this process was started by {job.launcher}")
    if starts == "threads":
        raise LaunchError(f"backend={backend!r} cannot run under {job.launcher}: use one of "
                          f"{process_backends()} or 'mpi' under mpirun ({backend} runs in one process: "
                          f"python script.py)")
    if "backend" in _world:
        if _world["name"] != backend or _world["device"] != device:
            raise LaunchError(f"launch(backend={backend!r}, device={device!r}): this job already runs backend "
                              f"{_world['name']!r} on device {_world['device']!r}; one backend and device per job")
        return _world["backend"], _world["store"]
    comm = None
    if job.launcher == "mpirun":
        from ..transports.mpi_progress import _mpi
        comm = _mpi().COMM_WORLD
    store = _store(job, comm)
    world = world_backend(backend, store, job.rank, job.world_size, "external/world", device)
    _world.update(name=backend, backend=world, store=store, device=device)
    atexit.register(_close_world)
    return world, store


def _close_world() -> None:
    """At exit, on every rank: end the world group's threads (gloo's listener, mpi's progress
    thread) before its connections go away.

    Not after a failed run: closing waits (up to 10 s) for every peer (its goodbye on gloo, a
    barrier on mpi), and peers that wait for this rank never get there; the process ends and
    the OS closes the connections."""
    world = _world.pop("backend", None)
    if world is not None and not _world.get("failed"):
        try:
            world.close()
        except Exception:  # noqa: BLE001 - a peer is already gone; the process is ending anyway
            pass


def all_gather_objects(backend, obj, deadline: float | None) -> list:
    """Every rank's `obj` (pickled), gathered through the world backend (not counted)."""
    blob = torch.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=torch.uint8)
    sizes = torch.empty(backend.size, dtype=torch.int64)
    backend.all_gather(sizes, torch.tensor([blob.numel()])).wait(deadline)
    padded = torch.zeros(int(sizes.max()), dtype=torch.uint8)
    padded[:blob.numel()] = blob
    out = torch.empty(backend.size * padded.numel(), dtype=torch.uint8)
    backend.all_gather(out, padded).wait(deadline)
    chunks = out.view(backend.size, -1)
    return [pickle.loads(chunks[r, :int(sizes[r])].numpy().tobytes()) for r in range(backend.size)]


def run_external(fn, world_size, job: ExternalJob, args, kwargs, backend, deadline, collectives,
                 trace, device=None) -> RunResult:
    if world_size is not None and world_size != job.world_size:
        raise LaunchError(f"launch(world_size={world_size}) but {job.launcher} started {job.world_size} "
                          f"processes: start {world_size} (e.g. mpirun -n {world_size}) or pass "
                          f"world_size=None to take the launcher's")
    backend = backend or default_backend(job)
    started = time.perf_counter()
    world, store = world_for(job, backend, device)
    world.barrier().wait(deadline)
    run_id = f"external-run{next(_runs)}"
    task = Task(run_id, cloudpickle.dumps((fn, tuple(args), kwargs)), deadline, collectives, trace,
                time.perf_counter())
    reply = run_task(task, world, store, job.rank, job.world_size,
                     lambda rid: BoardTracker(store, job.rank, job.world_size, prefix=rid))
    if reply[0] == "error":
        _world["failed"] = True
        f = reply[1]
        error = RankError(f["rank"], job.world_size, f["exc_type"], f["message"], f["traceback"])
        if job.launcher == "mpirun":   # end the whole job now: the other ranks would wait forever
            sys.stdout.flush()
            sys.stderr.write("".join(f"[rank {job.rank}] {line}\n" for line in str(error).splitlines()))
            sys.stderr.flush()
            time.sleep(0.3)            # let mpiexec forward that text: MPI_Abort kills its pipes too
            from ..transports.mpi_progress import _mpi
            _mpi().COMM_WORLD.Abort(1)
        raise error
    _, value, counters, events = reply
    gathered = all_gather_objects(world, (value, counters, events), deadline)
    return RunResult([g[0] for g in gathered], [g[1] for g in gathered],
                     [e for g in gathered for e in g[2]], backend, time.perf_counter() - started)
