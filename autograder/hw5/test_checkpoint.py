"""Hidden tests, task 5.5: activation checkpointing with gpipe_step and one_f_one_b_step, p = 2, 3, 4
(MLP with m = 2p+1 under both, CharTransformer with m = p under GPipe).

Results: the same parameters and losses as the one-process model (recomputation changes nothing).
How: the same 2(p-1)m messages and order; autograd's saved tensors peak at one micro-batch's worth
(the recomputation in backward) instead of m (GPipe) or min(p-j, m) (1F1B).
"""

import pytest

from assignments.hw5.tests.hw5_checks import judge
from autograder.hw5.cases import CHECKPOINT, TRAINING_CHECKS


@pytest.mark.task5_5
@pytest.mark.points(13)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_checkpointing_same_gradients_one_microbatch_saved(p):
    judge(CHECKPOINT.outcomes(p, ("ckpt_gpipe", "ckpt_1f1b")), *TRAINING_CHECKS)
