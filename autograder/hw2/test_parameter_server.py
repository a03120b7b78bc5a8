"""Hidden tests, task 2.1: the parameter server.

Results: after k steps every rank's parameters equal a single-process run on the whole batch
(within hw2_checks.TOL), the workers' models hold exactly rank 0's bits, and rank 0's step()
returns the global batch's mean loss; world sizes 1-4, both models, SGD with momentum and
AdamW, a batch of 22 that p = 3 and 4 do not divide. How: every point-to-point message has rank 0
at one end; no provided collective after the constructor; a worker moves only its gradient, the
trainable parameters and its part of the batch (a frozen parameter is never sent).
"""

import pytest

from assignments.hw2.tests.hw2_checks import judge, ps_traffic_problems, training_problems
from autograder.hw2.cases import PS, PS_TRAFFIC, WORLD_SIZES


@pytest.mark.task2_1
@pytest.mark.points(8)
@pytest.mark.time_limit(120)       # 4 world sizes: a deadlock costs a 10 s deadline at each
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_parameter_server_matches_single_process(p):
    judge(PS.outcomes(p, "ps", "core"), training_problems)


@pytest.mark.task2_1
@pytest.mark.points(4)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_parameter_server_moves_everything_through_rank_0(p):
    judge(PS_TRAFFIC.outcomes(p, "ps"), ps_traffic_problems, training_problems)
