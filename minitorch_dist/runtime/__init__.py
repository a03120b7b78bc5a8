"""The minitorch_dist runtime: groups, backends (gloo, mpi, sim), launchers, traces, deadlock reports.

Rank code sees only `Group`; `launch` starts the ranks. See group.py and launching/launch.py.
"""

from .errors import (CollectivesDisabledError, DeadlockError, DistError, LaunchError,
                     MessageMismatchError, PeerFailedError, RankError)
from .group import CollectiveHandle, Group, Handle, wait_all
from .launching.attach import world_group
from .launching.launch import launch, shutdown
from .observe.trace import Counters, Event, OpCount
from .results import RunResult

__all__ = ["Group", "Handle", "CollectiveHandle", "wait_all", "launch", "shutdown", "world_group", "RunResult", "Counters", "Event",
           "OpCount", "DistError", "DeadlockError", "MessageMismatchError", "CollectivesDisabledError",
           "PeerFailedError", "LaunchError", "RankError"]
