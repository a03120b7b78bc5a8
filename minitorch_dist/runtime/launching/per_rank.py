"""launch(..., rank_args=[...]): arguments that only one rank receives.

    launch(fn, 3, args=(shared,), rank_args=[(x0,), (x1,), (x2,)])    # rank r: fn(group, shared, xr)

Rank processes (gloo, mpi, nccl): each rank's element is pickled apart and sent to that rank's
process only, with its task (worker.Task.rank_payload), so no rank process ever holds another
rank's element (unless it inherited it: ranks forked by this very call copy the caller's memory;
warm ranks, spawned ranks, mpiexec's and a rank host's do not). So does a grading's sim engine
(sim/processes.py): its rank processes are forked holding every element, and each empties the one
list that holds them, keeping its own. The other paths run fn through `appended`, which picks the
rank's own element at call time: on the thread sim every rank is a thread of one process holding
every element, and under an outside launcher (mpirun, torchrun, srun) or after world_group() each
process holds what its own script built.
"""

from __future__ import annotations

import dataclasses

import cloudpickle

from ..errors import LaunchError


def check(rank_args, world_size) -> list[tuple]:
    """rank_args as a list of tuples, one per rank (LaunchError naming the problem otherwise)."""
    if isinstance(rank_args, (str, bytes)) or not hasattr(rank_args, "__len__"):
        raise LaunchError(f"launch: rank_args must be a list with one tuple of arguments per rank, "
                          f"got {type(rank_args).__name__}")
    own = list(rank_args)
    bad = [r for r, a in enumerate(own) if not isinstance(a, (tuple, list))]
    if bad:
        raise LaunchError(f"launch: rank_args[{bad[0]}] is a {type(own[bad[0]]).__name__}; each element is the "
                          f"tuple of arguments rank {bad[0]} gets after args (write (x,) for one argument)")
    if isinstance(world_size, int) and not isinstance(world_size, bool):
        _check_length(own, world_size)
    return [tuple(a) for a in own]


def _check_length(own: list, world_size: int) -> None:
    if len(own) != world_size:
        raise LaunchError(f"launch: rank_args has {len(own)} elements but the job has {world_size} ranks; "
                          f"give one tuple of arguments per rank")


def tasks(task, own: list[tuple] | None, world_size: int) -> list:
    """One task per rank: `task` itself for every rank, or a copy carrying that rank's element only."""
    if own is None:
        return [task] * world_size
    _check_length(own, world_size)
    return [dataclasses.replace(task, rank_payload=cloudpickle.dumps(own[r])) for r in range(world_size)]


class _Appended:
    """fn with the calling rank's element of rank_args after the shared args."""

    def __init__(self, fn, own: list[tuple]):
        self.fn, self.own = fn, own

    def __call__(self, group, *args, **kwargs):
        _check_length(self.own, group.size)
        return self.fn(group, *args, *self.own[group.rank], **kwargs)


def appended(fn, own: list[tuple] | None):
    """fn itself without rank_args; else a callable that adds the calling rank's own element."""
    return fn if own is None else _Appended(fn, own)
