"""The minitorch_dist runtime: groups, backends (gloo, mpi, sim), launchers, traces, deadlock reports.

Rank code sees only `Group`; `launch` starts the ranks. See group.py and launch.py.
"""

from .errors import (CollectivesDisabledError, DeadlockError, DistError, LaunchError,
                     MessageMismatchError, PeerFailedError, RankError)
from .group import CollectiveHandle, Group, Handle, wait_all
from .launch import launch, shutdown
from .results import RunResult
from .trace import Counters, Event, OpCount

__all__ = ["Group", "Handle", "CollectiveHandle", "wait_all", "launch", "shutdown", "RunResult", "Counters", "Event",
           "OpCount", "DistError", "DeadlockError", "MessageMismatchError", "CollectivesDisabledError",
           "PeerFailedError", "LaunchError", "RankError"]
