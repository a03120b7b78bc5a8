"""Hidden tests, task 3.3: ErrorFeedback.

Accounting at p 1-4, 6 steps of all_reduce(..., 'sum') on dyadic inputs (exact in float64), with the
harness's HalfGrid compressor (rounding to halves, all-reduced) and with TopK (k 3 of 20, a (5, 4)
gradient; k 2 of 13): every step every rank's residual equals (g + e_before) - what it sent, the
result equals the sum of what the ranks sent, and in total the results plus the final residuals
equal the sum of every input. The bytes carried are the payload's (TopK: 6 x 3 x 12 bytes).
Convergence: on a 16-dimensional quadratic whose minimum differs per rank (lr 0.3 x 0.99^t, 300
steps), error-feedback signSGD ends within 1e-4 (p 1) or 0.03 (p 2-4), relative, of the minimum of
the mean loss (reference: 2e-10 at p 1, 0.004-0.007 at p 2-4, 0.003 at p 8 on sim) where plain
signSGD stalls (0.0105 at p 1, 0.17-0.26 at p 2-4, 0.08 at p 8). Bad input: non-finite g, or a different size under the same name, raise ValueError.
"""

import pytest

from assignments.hw3.tests.hw3_checks import (bad_input_problems, comm_problems, error_feedback_problems, judge,
                                              quadratic_problems)
from autograder.hw3.cases import BAD_INPUT, BAD_WORLD_SIZE, COMM_WORLD_SIZES, CONVERGE, EF, WORLD_SIZES


@pytest.mark.task3_3
@pytest.mark.points(8)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_error_feedback_loses_nothing(p):
    judge(EF.outcomes(p, ("ef_grid", "ef_topk")), error_feedback_problems)


@pytest.mark.task3_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", COMM_WORLD_SIZES)
def test_error_feedback_sends_only_the_payload(p):
    judge(EF.outcomes(p, ("ef_grid", "ef_topk")), error_feedback_problems, comm_problems)


@pytest.mark.task3_3
@pytest.mark.points(6)
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_error_feedback_sign_sgd_converges(p):
    judge(CONVERGE.outcomes(p, "ef_sign_quadratic"), quadratic_problems)


@pytest.mark.task3_3
@pytest.mark.points(2)
def test_error_feedback_bad_input_raises_value_error():
    judge(BAD_INPUT.outcomes(BAD_WORLD_SIZE, "bad_error_feedback"), bad_input_problems)
