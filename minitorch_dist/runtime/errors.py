"""Errors the runtime raises. Each one says what happened, on which rank, and what to do."""

from __future__ import annotations

import os
import traceback


class DistError(RuntimeError):
    """Base class of every error raised by the minitorch_dist runtime."""


class DeadlockError(DistError, TimeoutError):
    """A blocking operation passed its deadline, or (on sim) every live rank is blocked.

    The message lists each rank's pending operation and the wait-for cycle, if any.
    """


class MessageMismatchError(DistError, ValueError):
    """A receive buffer does not match the message that was sent (shape, dtype or size)."""


class CollectivesDisabledError(DistError):
    """A provided collective was called in a run where they are switched off."""


class PeerFailedError(DistError):
    """This rank was stopped because another rank failed first (not the root cause)."""


class LaunchError(DistError):
    """The job could not be started or supervised (bad arguments, environment, a worker that died)."""


class RankError(DistError):
    """A rank failed. Raised in the caller of `launch`.

    Attributes:
        rank: the rank (of the world) that failed first.
        world_size: the size of the job.
        exc_type: the name of the exception class raised on that rank.
        remote_traceback: the traceback text from that rank.
        cause: the exception re-created in the caller when it could be unpickled, else None.
    """

    def __init__(self, rank: int, world_size: int, exc_type: str, message: str,
                 remote_traceback: str = "", cause: BaseException | None = None,
                 others: str = ""):
        self.rank = rank
        self.world_size = world_size
        self.exc_type = exc_type
        self.message = message
        self.remote_traceback = remote_traceback
        self.cause = cause
        self.others = others
        text = f"rank {rank} of {world_size} failed with {exc_type}: {message}"
        if remote_traceback:
            text += f"\n\n--- traceback on rank {rank} ---\n{remote_traceback.rstrip()}"
        if others:
            text += f"\n\n--- other ranks ---\n{others.rstrip()}"
        super().__init__(text)

    def __reduce__(self):
        return (RankError, (self.rank, self.world_size, self.exc_type, self.message,
                            self.remote_traceback, None, ""))


def not_implemented(exc: BaseException) -> str | None:
    """The stub's one-line message when `exc` is a homework stub's NotImplementedError (raised here or on
    a rank), else None: scripts print it instead of a traceback ("HW1 task 1.1: ping_pong is not ...")."""
    if isinstance(exc, NotImplementedError):
        return str(exc).splitlines()[0] if str(exc) else "not implemented yet"
    if isinstance(exc, RankError) and exc.exc_type == "NotImplementedError":
        return exc.message.splitlines()[0] if exc.message else "not implemented yet"
    return None


def run_unless_stub(script: str, fn, *args) -> int:
    """fn(*args) for a script's main; when a homework stub raises (here or on a rank), print
    "<script>: <the stub's line>: nothing to measure yet" and return 1 instead of a traceback."""
    try:
        return fn(*args)
    except (NotImplementedError, RankError) as exc:
        stub = not_implemented(exc)
        if stub is None:
            raise
        print(f"{script}: {stub}: nothing to measure yet")
        return 1


_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))   # every file of the runtime is under it


def user_traceback(exc: BaseException) -> str:
    """The traceback without the runtime's own frames, so the student's lines stand out.

    MINITORCH_DIST_FULL_TRACEBACK=1 keeps every frame.
    """
    tb = traceback.TracebackException.from_exception(exc)
    if not os.environ.get("MINITORCH_DIST_FULL_TRACEBACK"):
        frames = [f for f in tb.stack if not os.path.abspath(f.filename).startswith(_RUNTIME_DIR)]
        if frames:
            tb.stack = traceback.StackSummary.from_list(frames)
    # The message itself is shown above the traceback by RankError: list the frames only.
    return "Traceback (most recent call last):\n" + "".join(tb.stack.format())
