"""Hidden tests on sim at p = 8 (every rank a thread on a virtual network): the same checks as on gloo,
one test per task (quantized all-reduce, top-k and random-k, error feedback)."""

import pytest

from assignments.hw3.tests.hw3_checks import all_reduce_problems, comm_problems, error_feedback_problems, judge
from autograder.hw3.cases import SIM, SIM_CASES, SIM_WORLD_SIZE


def by_task():
    return [pytest.param(task, marks=getattr(pytest.mark, task), id=task) for task in SIM_CASES]


@pytest.mark.bound_to("test_compressed_all_reduce_is_the_sum_of_decompressed_payloads",
                      "test_top_k_all_reduce",
                      "test_error_feedback_loses_nothing")
@pytest.mark.points(6)
@pytest.mark.parametrize("task", by_task())
def test_on_sim_at_p_8(task):
    kinds = tuple(dict.fromkeys(c.kind for c in SIM_CASES[task]))
    check = error_feedback_problems if task == "task3_3" else all_reduce_problems
    judge(SIM.outcomes(SIM_WORLD_SIZE, kinds), check, comm_problems)
