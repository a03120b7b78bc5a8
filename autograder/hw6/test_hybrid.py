"""Hidden tests of HSDP (6.6, bonus) on gloo: after k steps of AdamW (and SGD with momentum) the
parameters equal one process's on the global batch (float64) at 4 ranks as 2 x 2 and at 3 ranks as
3 x 1 and 1 x 3; per unit and step two all-gathers and a reduce-scatter inside the shard group of
consecutive ranks and one all-reduce of the gradient shard across the replica group, with their
bytes; parameters, gradients and optimizer state 1/s per rank; a shard_size that does not divide p
(2 at p = 3) is a clear error."""

import pytest

from assignments.hw6.tests.hw6_checks import bad_input_problems, judge, memory_problems, result_problems
from assignments.hw6.tests.hw6_hybrid_checks import hybrid_comm_problems
from autograder.hw6.cases import BAD_HYBRID, HYBRID

CHECKS = (result_problems, hybrid_comm_problems, memory_problems)


@pytest.mark.task6_6
@pytest.mark.points(2)
def test_hsdp_two_shard_groups_of_two():
    judge(HYBRID.outcomes(4, "hsdp"), *CHECKS)


@pytest.mark.task6_6
@pytest.mark.points(2)
def test_hsdp_three_ranks_one_group_or_three_replicas():
    judge(HYBRID.outcomes(3, "hsdp"), *CHECKS)


@pytest.mark.task6_6
@pytest.mark.points(1)
def test_hsdp_rejects_a_shard_size_that_does_not_divide_p():
    judge(BAD_HYBRID.outcomes(3, "bad_hsdp"), bad_input_problems)
