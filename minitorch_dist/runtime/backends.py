"""The backends a run can name, and how each one's ranks start: the one list every launcher reads.

    launch(main, 4, backend="gloo")           # launching/launch.py checks the name here
    python -m minitorch_dist.run -n 4 ...     # run.py offers the "processes" backends
    torchrun / mpirun / srun                  # launching/external.py builds the world from here

A backend is one class in one file (a Backend: backend.py) plus one line in BACKENDS below. The
line says where the class lives (imported only when a run uses it) and how ranks start:
    "processes"  local rank processes forked by the launcher's pool, or started by an outside
                 launcher (torchrun, srun, mpirun); the class builds the world group from the
                 job's TCPStore with `Backend.world(store, rank, size, key)`
    "mpiexec"    rank processes started by mpiexec (the launcher runs it); the world is MPI's
    "threads"    every rank a thread of the calling process (the simulator)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .errors import LaunchError


@dataclass(frozen=True)
class BackendInfo:
    name: str
    module: str       # the module that holds the class (full name)
    cls: str
    starts: str       # "processes", "mpiexec" or "threads"
    what: str         # one line for help texts and errors


BACKENDS = {info.name: info for info in (
    BackendInfo("gloo", "minitorch_dist.runtime.transports.gloo", "GlooBackend", "processes", "CPU processes over torch's gloo"),
    BackendInfo("mpi", "minitorch_dist.runtime.transports.mpi", "MpiBackend", "mpiexec", "processes started by mpiexec, over mpi4py"),
    BackendInfo("sim", "minitorch_dist.runtime.sim.network", "SimBackend", "threads", "threads with a virtual clock and an alpha-beta network"),
    BackendInfo("nccl", "minitorch_dist.runtime.transports.nccl", "NcclBackend", "processes", "one GPU per rank, collectives by NCCL"),
)}


def backend_info(name: str, where: str = "launch") -> BackendInfo:
    """The registry line of backend `name`, or a LaunchError that lists the names there are."""
    info = BACKENDS.get(name)
    if info is None:
        raise LaunchError(f"{where}: backend={name!r}; use one of {tuple(BACKENDS)} "
                          + "; ".join(f"{b.name}: {b.what}" for b in BACKENDS.values()))
    return info


def backend_class(name: str):
    """The Backend class of `name` (imports its module)."""
    info = backend_info(name)
    return getattr(importlib.import_module(info.module), info.cls)


def world_backend(name: str, store, rank: int, size: int, key: str, device=None):
    """In a rank process: the world group's backend of a job of `size` processes sharing `store`."""
    return backend_class(name).world(store, rank, size, key, device)


def process_backends() -> tuple[str, ...]:
    """Backends whose ranks are processes a launcher forks or an outside launcher starts."""
    return tuple(b.name for b in BACKENDS.values() if b.starts == "processes")
