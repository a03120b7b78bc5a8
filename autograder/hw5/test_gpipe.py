"""Hidden tests, tasks 5.2 and 5.3: gpipe_step and one_f_one_b_step at p = 1..4; MLP with m = 1, p,
2p+1, CharTransformer with m = p.

Results: parameters after two steps and losses equal the one-process model's (the loss of each
micro-batch scaled by 1/m, gradients accumulated, one optimizer step per batch). How: exactly
2(p-1)m messages per step, of the boundary's bytes; GPipe's trace shows every forward before any
backward, 1F1B's min(p-j-1, m) warm-up forwards, then F/B in turn, then the drain; saved
activations (saved-tensor hooks) peak at m micro-batches for GPipe and min(p-j, m) for 1F1B.
At p > 1 also on sim with rendezvous messages (sends wait for their receive: 1F1B with blocking sends
deadlocks there). Bad input: a batch of 7 (MLP) or 5 (CharTransformer) samples with m = 2 raises ValueError naming it.
"""

import pytest

from assignments.hw5.tests.hw5_checks import bad_batch_problems, judge
from autograder.hw5.cases import BAD, GPIPE, ONE_F_ONE_B, RENDEZVOUS, TRAINING_CHECKS, WORLD_SIZES


@pytest.mark.task5_2
@pytest.mark.points(12)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_gpipe_matches_one_process_forwards_then_backwards(p):
    judge(GPIPE.outcomes(p, "gpipe") + (RENDEZVOUS.outcomes(p, "gpipe") if p > 1 else []), *TRAINING_CHECKS)


@pytest.mark.task5_3
@pytest.mark.points(12)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_one_f_one_b_matches_one_process_in_order_with_p_alive(p):
    judge(ONE_F_ONE_B.outcomes(p, "1f1b") + (RENDEZVOUS.outcomes(p, "1f1b") if p > 1 else []), *TRAINING_CHECKS)


@pytest.mark.points(4)
@pytest.mark.parametrize("kind", [pytest.param("bad_batch", marks=pytest.mark.task5_2, id="gpipe"),
                                  pytest.param("bad_batch_1f1b", marks=pytest.mark.task5_3, id="1f1b")])
def test_batch_not_divisible_by_m_is_a_clear_error(kind):
    judge(BAD.outcomes(3, kind), bad_batch_problems)
