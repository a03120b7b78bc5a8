"""Hidden tests, tasks 1.2-1.7: bad input raises ValueError on a rank (an unknown op, a
non-contiguous x, a root outside the group); a rank that never arrives is reported as a
deadlock, with the wait-for report, as soon as MINITORCH_DIST_DEADLINE has passed."""

import time

import pytest

from assignments.hw1.tests.hw1_checks import fail
from assignments.hw1.tests.hw1_harness import rank_all_but_last, rank_call_bad, try_launch
from minitorch_dist import DistError

WHAT = {"op": "op='average'", "non-contiguous": "a non-contiguous x (a transposed 6x4 tensor)",
        "root": "root=p (not a rank of the group)"}


def check_rejects(fn: str, bad: str, backend: str = "sim", p: int = 3) -> None:
    """fn must raise ValueError on some rank; the launch comes back as a RankError with that cause."""
    result, err = try_launch(rank_call_bad, p, args=(fn, bad), backend=backend)
    if err is None:
        fail(f"{fn} with {WHAT[bad]} on {backend} (p={p}) returned on every rank; it must raise ValueError")
    if err.exc_type == "NotImplementedError":
        fail(err.message)
    if not isinstance(err.cause, ValueError) or isinstance(err.cause, DistError):
        fail(f"{fn} with {WHAT[bad]} on {backend} (p={p}): rank {err.rank} raised {err.exc_type}: "
             f"{err.message.splitlines()[0] if err.message else ''}; expected ValueError (check the argument "
             f"before any message is sent)")


@pytest.mark.task1_2
@pytest.mark.points(2)
@pytest.mark.parametrize("fn,bad", [("broadcast", "root"), ("broadcast", "non-contiguous"), ("reduce", "op"),
                                    ("reduce", "root"), ("reduce", "non-contiguous")])
def test_broadcast_and_reduce_reject_bad_input(fn, bad):
    check_rejects(fn, bad)


@pytest.mark.task1_3
@pytest.mark.points(1)
@pytest.mark.parametrize("fn,bad", [("reduce_scatter_", "op"), ("reduce_scatter_", "non-contiguous"),
                                    ("all_gather_", "non-contiguous")])
def test_reduce_scatter_and_all_gather_reject_bad_input(fn, bad):
    check_rejects(fn, bad)


# The four all-reduces share one graded function (4 points); each case carries its task.
ALL_REDUCE_TASKS = {"naive_all_reduce": "task1_4", "tree_all_reduce": "task1_5",
                    "butterfly_all_reduce": "task1_6", "ring_all_reduce": "task1_7"}
BAD_ALL_REDUCE = [pytest.param(fn, bad, backend, marks=getattr(pytest.mark, task), id=f"{fn}-{bad}")
                  for fn, task in ALL_REDUCE_TASKS.items()
                  for bad, backend in (("op", "gloo"), ("non-contiguous", "sim"))]


@pytest.mark.points(4)
@pytest.mark.parametrize("fn,bad,backend", BAD_ALL_REDUCE)
def test_all_reduces_reject_bad_input(fn, bad, backend):
    check_rejects(fn, bad, backend)


@pytest.mark.task1_7
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_ring_all_reduce_missing_rank_is_a_deadlock_report(monkeypatch):
    """Rank 2 of 3 never calls ring_all_reduce: the others must block in a message (not spin, not
    return), so the runtime reports a deadlock with the wait-for report once the deadline passes."""
    deadline = 1.5
    monkeypatch.setenv("MINITORCH_DIST_DEADLINE", str(deadline))
    start = time.monotonic()
    result, err = try_launch(rank_all_but_last, 3, args=("ring_all_reduce", 12))
    elapsed = time.monotonic() - start
    if err is None:
        fail(f"ranks 0 and 1 returned {list(result)[:2]} although rank 2 never joined the all-reduce")
    if err.exc_type == "NotImplementedError":
        fail(err.message)
    if err.exc_type != "DeadlockError" or "waits in" not in str(err):
        fail(f"expected a DeadlockError with the wait-for report, got {err.exc_type}: {err.message}")
    if elapsed > deadline + 20:
        fail(f"the deadlock was reported after {elapsed:.1f} s; the deadline was {deadline} s")
