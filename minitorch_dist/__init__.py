"""minitorch_dist: build the machinery of distributed deep learning from send/recv up.

    from minitorch_dist import launch

    def main(group):
        ...  # group.rank, group.size, group.send/recv, ...

    results = launch(main, world_size=4)   # or backend="sim" / "mpi"
"""

from .runtime import (CollectivesDisabledError, DeadlockError, DistError, Group, Handle, LaunchError,
                      MessageMismatchError, PeerFailedError, RankError, RunResult, launch, shutdown,
                      wait_all, world_group)
from . import cost_model
from .runtime.sim import SimNetwork

__all__ = ["launch", "shutdown", "world_group", "Group", "Handle", "wait_all", "RunResult", "cost_model", "SimNetwork",
           "DistError", "DeadlockError", "MessageMismatchError", "CollectivesDisabledError",
           "PeerFailedError", "LaunchError", "RankError"]
