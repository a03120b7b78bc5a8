"""Hidden tests of ZeRO-1 (6.1) and ZeRO-2 (6.2) on gloo: after 3 steps the parameters equal one
process's on the global batch; each step one reduce-scatter (per bucket) and one all-gather, the
bytes of a DDP all-reduce; optimizer state (and for ZeRO-2 gradients) for the shard only."""

import pytest

from assignments.hw6.tests.hw6_checks import comm_problems, judge, memory_problems, result_problems
from autograder.hw6.cases import WORLD_SIZES, ZERO1, ZERO1_F32, ZERO2

CHECKS = (result_problems, comm_problems, memory_problems)


@pytest.mark.task6_1
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_zero1(p):
    judge(ZERO1.outcomes(p, "zero1"), *CHECKS)


@pytest.mark.task6_1
@pytest.mark.points(1)
@pytest.mark.parametrize("p", [1, 3])
def test_zero1_float32_real_optimizer_ranks_start_apart(p):
    judge(ZERO1_F32.outcomes(p, "zero1"), *CHECKS)


@pytest.mark.task6_2
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_zero2(p):
    judge(ZERO2.outcomes(p, "zero2"), *CHECKS)
