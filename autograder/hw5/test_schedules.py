"""Hidden tests, task 5.4: schedules as data.

Generators: gpipe_schedule(p, m) and one_f_one_b_schedule(p, m) for ten (p, m) (p = 1..5, m = 1..9,
m below, equal to and above p) pass the provided validator and are exactly GPipe's and 1F1B's
actions ([RECV_F] F [SEND_F] per forward, [RECV_B] B [SEND_B] per backward). Run by the provided
executor at p = 2, 3, 4 (MLP m = 2p+1, CharTransformer m = p): the same checks as the
step functions (results, 2(p-1)m messages, order from the trace, saved activations). A hand-written
deadlocking schedule (sim, p = 2 and 3): the validator names the cycle, and run unvalidated it
ends in the runtime's wait-for report.
"""

import pytest

from assignments.hw5.tests.hw5_checks import deadlock_problems, generator_problems, judge
from autograder.hw5.cases import DEADLOCK, RENDEZVOUS, SCHEDULES, TRAINING_CHECKS


@pytest.mark.task5_4
@pytest.mark.points(8)
def test_generators_are_valid_gpipe_and_1f1b():
    judge(SCHEDULES.outcomes(2, "generators"), generator_problems)


@pytest.mark.task5_4
@pytest.mark.points(8)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_executor_runs_generated_schedules(p):
    judge(SCHEDULES.outcomes(p, ("sched_gpipe", "sched_1f1b")) + RENDEZVOUS.outcomes(p, "sched_1f1b"), *TRAINING_CHECKS)


@pytest.mark.task5_4
@pytest.mark.points(3)
@pytest.mark.parametrize("p", [2, 3])
def test_deadlocking_schedule_gives_the_wait_for_report(p):
    judge(DEADLOCK.outcomes(p, "deadlock"), deadlock_problems)
