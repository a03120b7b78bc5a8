"""A world Group for a program that is already distributed (torch.multiprocessing, torchrun, mpirun).

    def run(rank, world_size):                          # torch's tutorials, unchanged
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "localhost", "29500"
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        group = minitorch_dist.world_group()            # this process's rank of the same job
        ring_all_reduce(group, x)                       # any rank code of the kit
        group.close()                                   # collective: every rank calls it
        dist.destroy_process_group()

    torch.multiprocessing.spawn(run, args=(4,), nprocs=4)

Where the job comes from, in this order:
- torch.distributed is initialised: rank and size are torch's, and the group's own connections
  meet through torch's store (under a prefix of their own: torch's process groups are untouched);
- an outside launcher's environment (torchrun, srun, mpirun, python -m minitorch_dist.run; see
  env.py): the same world group launch() uses in such a process.
Anything else is a clear LaunchError that says what to start the program with.

One group per process: calling world_group() again returns it until it is closed. Deadlock
tracking lives as long as the group: a rank blocked in a Group call is reported blocked on every
peer's deadlock report, a rank that closed its group as finished. close() (or leaving a `with
world_group() as group:` block) is collective; at exit an open group is closed for you.

launch() in such a process runs its function on this group once world_group() was called; before
that, inside an initialised torch.distributed job, it refuses (it would otherwise start a second,
local job of its own beside the program's).
"""

from __future__ import annotations

import atexit
import itertools
import time

import torch.distributed as dist

from ..backends import backend_info, world_backend
from ..context import RankContext
from ..env import default_deadline, detect_external
from ..errors import LaunchError
from ..group import Group
from ..observe.deadlock import FINISHED, RUNNING
from ..observe.trace import Recorder
from ..observe.tracker import BoardTracker
from ..results import RunResult

_attached: dict = {}              # "group": this process's AttachedGroup while it is open
_generations = itertools.count()


class AttachedGroup(Group):
    """The world Group of a process that joined an existing job (world_group()). Close it once."""

    closed = False

    def __init__(self, backend, ctx, owns_world: bool):
        super().__init__(backend, ctx)
        self._owns_world = owns_world     # the world backend is this group's own (else external.py's)

    def run(self, fn, world_size, args, kwargs) -> RunResult:
        """launch(fn) after world_group(): fn(self, *args, **kwargs) here, every rank's value gathered.

        Counters and events are the group's since it was opened (it outlives one run). A rank that
        raises raises here; its peers meet their deadline (or the launcher's end of the job)."""
        if world_size is not None and world_size != self.size:
            raise LaunchError(f"launch(world_size={world_size}) but this job has {self.size} ranks: pass "
                              f"world_size=None (or {self.size}) after world_group()")
        started = time.perf_counter()
        value = fn(self, *args, **kwargs)
        from .external import all_gather_objects
        gathered = all_gather_objects(self._backend, (value, self.counters, list(self.events)),
                                      self._ctx.deadline)
        return RunResult([g[0] for g in gathered], [g[1] for g in gathered],
                         [e for g in gathered for e in g[2]], self.backend, time.perf_counter() - started)

    def close(self) -> None:
        """Collective: every rank calls it. Ends the sub-groups, marks this rank finished on the
        deadlock board and releases the group's own connections."""
        if self.closed:
            return
        self.closed = True
        _attached.pop("group", None)
        ctx = self._ctx
        for sub in reversed(ctx.subgroups):
            sub.close()
        ctx.tracker.set_status(FINISHED, "closed its world_group()")
        ctx.tracker.close()
        if self._owns_world:
            try:
                self._backend.close()
            except RuntimeError:      # a deadline expired earlier: gloo closed that connection then
                pass

    def __enter__(self) -> "AttachedGroup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def attached_group() -> AttachedGroup | None:
    """This process's open world_group(), if any."""
    return _attached.get("group")


def torch_distributed_initialised() -> bool:
    return dist.is_available() and dist.is_initialized()


def world_group(backend: str | None = None, *, deadline: float | None | str = "default",
                collectives: bool = True, trace: bool = False, device: str | None = None) -> AttachedGroup:
    """This process's world Group in the job it already belongs to (see the module docstring).

    backend: "gloo" (default), "nccl" or "mpi" (under mpirun only). device: "cpu" (default) or
    "cuda", as for launch(). deadline: seconds a blocking call
    may wait before its deadlock report (default 60 s or MINITORCH_DIST_DEADLINE; None: no
    limit). collectives, trace: as for launch().
    """
    group = _attached.get("group")
    if group is not None:
        if backend is not None and backend != group.backend:
            raise LaunchError(f"world_group(backend={backend!r}): this process's group is already "
                              f"{group.backend!r}; one world group per process (close() it first)")
        return group
    if deadline == "default":
        deadline = default_deadline()
    generation = next(_generations)    # the same on every rank: each opens and closes in step
    if torch_distributed_initialised():
        world, store, owns, rank, size = _from_torch(backend, generation, device)
    else:
        job = detect_external()
        if job is None:
            raise LaunchError(
                "world_group(): this process is not a rank of a distributed job. Call "
                "torch.distributed.init_process_group(...) first, or start the program with torchrun, "
                "mpirun or python -m minitorch_dist.run; to start ranks from here, use launch(fn, world_size)")
        from .external import default_backend, world_for
        world, store = world_for(job, backend or default_backend(job), device)
        owns, rank, size = False, job.rank, job.world_size
    run_id = f"attached/{generation}"
    ctx = RankContext(rank, size, deadline=deadline, collectives=collectives, recorder=Recorder(rank, trace),
                      tracker=BoardTracker(store, rank, size, prefix=run_id), t0=time.perf_counter(),
                      run_id=run_id)
    ctx.tracker.set_status(RUNNING)
    group = AttachedGroup(world, ctx, owns)
    _attached["group"] = group
    return group


def _from_torch(backend: str | None, generation: int, device):
    name = backend or ("nccl" if dist.get_backend() == "nccl" else "gloo")
    starts = backend_info(name, "world_group").starts
    if starts != "processes":
        raise LaunchError(f"world_group(backend={name!r}) in a torch.distributed job: use gloo (mpi needs "
                          f"mpirun and init_process_group's job is not one; sim runs in one process)")
    rank, size = dist.get_rank(), dist.get_world_size()
    store = dist.PrefixStore("minitorch_dist", dist.distributed_c10d._get_default_store())
    world = world_backend(name, store, rank, size, f"attached/{generation}/world", device)
    return world, store, True, rank, size


def _close_at_exit() -> None:
    group = _attached.get("group")
    if group is not None:
        try:
            group.close()
        except Exception:  # noqa: BLE001 - a peer is already gone; the process is ending anyway
            pass


atexit.register(_close_at_exit)
