"""Hidden tests on the other backends.

Sim (free messages, every stage 1 ms forward and 2 ms backward per micro-batch): for (p, m) =
(2, 3), (3, 5), (4, 4), (4, 9) a step takes (m+p-1)(t_f+t_b) simulated seconds, a bubble of
(p-1)/(m+p-1), for GPipe, 1F1B and the executor running one_f_one_b_schedule; results exact too.
MPI (ranks started by mpiexec): GPipe and 1F1B at p = 2, the same checks as on gloo.
"""

import pytest

from assignments.hw5.tests.hw5_checks import judge, timing_problems
from autograder.hw5.cases import MPI, MPI_WORLD_SIZE, SIM, SIM_SIZES, TRAINING_CHECKS

KINDS = {"task5_2": "gpipe", "task5_3": "1f1b", "task5_4": "sched_1f1b"}


def by_task(tasks):
    return [pytest.param(task, marks=getattr(pytest.mark, task), id=task) for task in tasks]


@pytest.mark.bound_to("test_gpipe_matches_one_process_forwards_then_backwards",
                      "test_one_f_one_b_matches_one_process_in_order_with_p_alive",
                      "test_executor_runs_generated_schedules")
@pytest.mark.points(6)
@pytest.mark.parametrize("task", by_task(KINDS))
def test_bubble_on_sim(task):
    judge([o for p in SIM_SIZES for o in SIM.outcomes(p, KINDS[task])], timing_problems, *TRAINING_CHECKS[:2])


@pytest.mark.bound_to("test_gpipe_matches_one_process_forwards_then_backwards",
                      "test_one_f_one_b_matches_one_process_in_order_with_p_alive")
@pytest.mark.mpi
@pytest.mark.points(4)
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("task", by_task(("task5_2", "task5_3")))
def test_on_mpi(task):
    judge(MPI.outcomes(MPI_WORLD_SIZE, KINDS[task]), *TRAINING_CHECKS)
