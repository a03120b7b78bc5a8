"""Hidden tests, tasks 2.2-2.4: the three all-reduce versions share one suite (each case carries
its version's task).

Results: after k steps (SGD with momentum, and AdamW) every rank's parameters equal a
single-process run on the whole global batch within hw2_checks.TOL = 1e-12 (float64; TOL_ADAMW =
1e-11 with AdamW), and every replica holds exactly rank 0's bits; world sizes 1-4; the MLP and the
tied-weight transformer. The batches are drawn from the grading's secret and each rank is sent only
its part (hw2_inputs.py): a rank that skips the all-reduce cannot rebuild the others' gradients.
Edge cases: a frozen parameter (never sent: bytes counted), a parameter unused on odd steps
(its .grad stays None, as in the reference), gradient accumulation under no_sync (no all-reduce
during accumulation steps). How: per step, the version's number of all-reduces of exactly the
gradients' bytes, after backward (2.2) or some started before backward returned (2.3, 2.4).
Faults: a rank that dies mid-training fails the run fast, naming the rank.
"""

import time

import pytest

from assignments.hw2.tests.hw2_checks import error_text, fail, how_problems, judge, outside_problems, training_problems
from assignments.hw2.tests.hw2_harness import rank_bucketed_rank_dies, try_launch
from autograder.hw2.cases import (CORE, EDGE, EDGE_WORLD_SIZES, EDGES, HOW, HOW_WORLD_SIZE, SIM, VERSION_TASKS,
                                  WORLD_SIZES)


def by_version(*more):
    """pytest params (version, *more) marked with the version's task."""
    from itertools import product
    return [pytest.param(v, *rest, marks=getattr(pytest.mark, VERSION_TASKS[v]), id="-".join(map(str, (v, *rest))))
            for v, rest in product(VERSION_TASKS, product(*more) if more else [()])]


@pytest.mark.points(21)
@pytest.mark.time_limit(120)       # 4 world sizes: a deadlocking version costs a 10 s deadline at each
@pytest.mark.parametrize("version,p", by_version(WORLD_SIZES))
def test_ddp_matches_single_process(version, p):
    judge(CORE.outcomes(p, version), training_problems)


@pytest.mark.points(12)
@pytest.mark.parametrize("version,edge", by_version(EDGES))
def test_ddp_edge_cases(version, edge):
    outcomes = [o for p in EDGE_WORLD_SIZES for o in EDGE.outcomes(p, version, f"edge:{edge}")]
    judge(outcomes, training_problems, how_problems, *([outside_problems] if edge == "outside" else []))


@pytest.mark.points(9)
@pytest.mark.parametrize("version", by_version())
def test_ddp_how_gradients_are_averaged(version):
    judge(HOW.outcomes(HOW_WORLD_SIZE, version), how_problems)


@pytest.mark.bound_to("test_ddp_matches_single_process")
@pytest.mark.points(3)
@pytest.mark.parametrize("version", by_version())
def test_ddp_on_sim(version):
    judge(SIM.outcomes(3, version), training_problems)


@pytest.mark.task2_4
@pytest.mark.points(2)
@pytest.mark.time_limit(60)
def test_bucketed_ddp_rank_death_fails_fast():
    """Rank 1 of 3 calls os._exit in step 2 of BucketedDDP training: the run must end with an error
    naming rank 1 within FAST seconds (the others must not hang in their all-reduces)."""
    fast = 20.0
    start = time.monotonic()
    result, err = try_launch(rank_bucketed_rank_dies, 3, args=(1, 2))
    elapsed = time.monotonic() - start
    if err is None:
        fail(f"the run returned {type(result).__name__} although rank 1 exited in step 2")
    if err.exc_type == "NotImplementedError":
        fail(err.message)
    if err.rank != 1 or "rank 1" not in str(err):
        fail(f"expected a report naming rank 1 (the rank that exited); got:\n{error_text(err)[:1500]}")
    if elapsed > fast:
        fail(f"the failure of rank 1 was reported after {elapsed:.1f} s; it must come within {fast:g} s")
