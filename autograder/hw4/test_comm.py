"""Hidden tests, task 4.1: the conjugate communication ops, alone, at TP sizes 2, 3 and 4.

copy_to_region (f) returns its input and sums the ranks' gradients; reduce_from_region (g) sums
the ranks' inputs and passes the gradient through; scatter_last_dim keeps this rank's slice and
all-gathers the gradient; gather_last_dim all-gathers the slices (rank order) and keeps this
rank's slice of the gradient. Each with exactly one provided collective, in the pass its
docstring names, and nothing in the other (float64, against closed forms).
"""

import pytest

from assignments.hw4.tests.hw4_checks import comm_problems, judge, result_problems
from assignments.hw4.tests.hw4_setup import COMM_KINDS
from autograder.hw4.cases import COMM, COMM_WORLD_SIZES


@pytest.mark.task4_1
@pytest.mark.points(10)
@pytest.mark.parametrize("p", COMM_WORLD_SIZES)
def test_comm_ops_forward_and_backward(p):
    judge(COMM.outcomes(p, COMM_KINDS), result_problems, comm_problems)
