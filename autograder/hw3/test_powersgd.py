"""Hidden tests, task 3.4: PowerSGD.

Against torch's own DistributedDataParallel + powerSGD_hook on the same float64 MLP, batches, rank
and seed (hw3_powersgd.py): every step's averaged gradients within 1e-9, at p 2 (rank 2 with error
feedback and warm start, rank 1 with neither) and p 3 (rank 3 with both, where torch orthogonalizes
by QR: the same subspace), 4 steps, compression from step 2 (each case is one run of torch, about
5-10 s). Bytes: the dense bucket before, then plain elements + (n + m) r per compressed matrix,
in at most three all-reduces. A bucket whose mean gradient has rank r (a (12, 10) matrix, a
(4, 3, 5) one and a vector) comes back exactly from PowerSGD of rank r (1 and 2) at p 1-3. orthogonalize_ is Gram-Schmidt in place.
"""

import pytest

from assignments.hw3.tests.hw3_checks import judge
from assignments.hw3.tests.hw3_ddp_checks import orthogonalize_problems, powersgd_problems, rank1_problems
from autograder.hw3.cases import POWERSGD


@pytest.mark.task3_4
@pytest.mark.points(8)
@pytest.mark.time_limit(300)
@pytest.mark.parametrize("p", (2, 3))
def test_powersgd_matches_torch_hook(p):
    judge(POWERSGD.outcomes(p, "powersgd_ddp"), powersgd_problems)


@pytest.mark.task3_4
@pytest.mark.points(3)
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("p", (1, 2, 3))
def test_powersgd_recovers_a_rank_one_mean(p):
    judge(POWERSGD.outcomes(p, "powersgd_rank1"), rank1_problems)


@pytest.mark.task3_4
@pytest.mark.points(3)
def test_orthogonalize_is_gram_schmidt():
    judge(POWERSGD.outcomes(1, "orthogonalize"), orthogonalize_problems)
