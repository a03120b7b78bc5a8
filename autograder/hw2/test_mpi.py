"""Hidden tests, tasks 2.4-2.6 on mpi (ranks started by mpiexec, p = 3): bucketed DDP matches the
single-process run, ring gossip and push-sum are exact. One graded function (one mpiexec job);
each case carries its task."""

import pytest

from assignments.hw2.tests.hw2_checks import how_problems, judge, training_problems
from assignments.hw2.tests.hw2_gossip_checks import push_sum_problems, ring_gossip_problems
from autograder.hw2.cases import MPI, MPI_WORLD_SIZE

CHECKS = {"bucketed": (training_problems, how_problems), "ring_gossip": (ring_gossip_problems,),
          "push_sum": (push_sum_problems,)}
CASES = [pytest.param("bucketed", marks=pytest.mark.task2_4, id="bucketed"),
         pytest.param("ring_gossip", marks=pytest.mark.task2_5, id="ring_gossip"),
         pytest.param("push_sum", marks=pytest.mark.task2_6, id="push_sum")]


@pytest.mark.bound_to("test_ddp_how_gradients_are_averaged", "test_ring_gossip_step", "test_push_sum_step_is_exact")
@pytest.mark.mpi
@pytest.mark.points(3)
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("kind", CASES)
def test_on_mpi(kind):
    judge(MPI.outcomes(MPI_WORLD_SIZE, kind), *CHECKS[kind])
