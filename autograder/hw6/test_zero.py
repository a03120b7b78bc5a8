"""Hidden tests of ZeRO-1 (6.1) and ZeRO-2 (6.2) on gloo: after 2 steps the parameters equal one
process's on the global batch; each step one reduce-scatter (per bucket) and one all-gather, the
bytes of a DDP all-reduce; optimizer state (and for ZeRO-2 gradients) for the shard only."""

import pytest

from assignments.hw6.tests.hw6_checks import comm_problems, judge, memory_problems, result_problems
from autograder.hw6.cases import WORLD_PAIRS, ZERO1, ZERO1_F32, ZERO2

CHECKS = (result_problems, comm_problems, memory_problems)


@pytest.mark.task6_1
@pytest.mark.points(2)
@pytest.mark.parametrize("sizes", WORLD_PAIRS, ids=["p1-2", "p3-4"])
def test_zero1(sizes):
    judge([o for p in sizes for o in ZERO1.outcomes(p, "zero1")], *CHECKS)


@pytest.mark.task6_1
@pytest.mark.points(1)
def test_zero1_float32_real_optimizer_ranks_start_apart():
    judge(ZERO1_F32.outcomes(3, "zero1"), *CHECKS)


@pytest.mark.task6_2
@pytest.mark.points(2)
@pytest.mark.parametrize("sizes", WORLD_PAIRS, ids=["p1-2", "p3-4"])
def test_zero2(sizes):
    judge([o for p in sizes for o in ZERO2.outcomes(p, "zero2")], *CHECKS)
