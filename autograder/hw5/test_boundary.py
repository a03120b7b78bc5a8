"""Hidden tests, task 5.1: the stage boundary, driven one micro-batch at a time (no pipelining) by the
provided executor, p = 2, 3, 4; MLP with m = 1 and 2p+1, CharTransformer with m = p.

Results: every stage's parameters after two SGD-momentum steps equal the whole model's trained on the
whole batch (float64), and the last stage's losses its losses. How: rank j sends m activations
(j < p-1) and m gradients (j > 0) per step, of the boundary's bytes (2(p-1)m in all); the trace
shows F0 B0 F1 B1 ...; autograd holds one micro-batch of saved tensors at a time; the stash is
empty after the step.
"""

import pytest

from assignments.hw5.tests.hw5_checks import judge
from autograder.hw5.cases import BOUNDARY, TRAINING_CHECKS


@pytest.mark.task5_1
@pytest.mark.points(18)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_boundary_send_recv_forward_backward(p):
    judge(BOUNDARY.outcomes(p, "boundary"), *TRAINING_CHECKS)
