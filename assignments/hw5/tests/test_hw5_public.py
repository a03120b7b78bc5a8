"""Public tests of homework 5 (a subset of the hidden ones): 2 and 3 stages on gloo, one sim timing.

    .venv/bin/python -m tools.overlay solutions -- .venv/bin/python -m pytest assignments/hw5/tests -m task5_3
"""

import pytest

from assignments.hw5.tests.hw5_bonus_checks import (grid_exact_problems, grid_layout_problems,
                                                    interleaved_exact_problems, interleaved_generator_problems,
                                                    interleaved_message_problems)
from assignments.hw5.tests.hw5_checks import (bad_batch_problems, deadlock_problems, exact_problems,
                                              generator_problems, judge, memory_problems, message_problems,
                                              order_problems, timing_problems)
from assignments.hw5.tests.hw5_harness import Case, GridSuite, Suite
from assignments.hw5.tests.hw5_vocab_checks import layer_message_problems, layer_problems, pipeline_problems
from minitorch_dist import SimNetwork

TRAINING_CHECKS = (exact_problems, message_problems, order_problems, memory_problems)


def public_cases(p: int) -> list[Case]:
    cases = [Case("boundary", "mlp", 2), Case("gpipe", "mlp", p + 1), Case("1f1b", "transformer", 2 * p + 1),
             Case("sched_gpipe", "mlp", p), Case("sched_1f1b", "mlp", 2 * p + 1), Case("ckpt_gpipe", "mlp", p + 1)]
    return cases + [Case("bad_batch"), Case("generators")] if p == 2 else cases


PUBLIC = Suite(public_cases)
BONUS = Suite(lambda p: [Case("interleaved", "deep_mlp", 3), Case("interleaved_generators")])
GRID = GridSuite(lambda p: [Case("data_parallel", "mlp", 2)])
VOCAB = GridSuite(lambda p: [Case("vocab_layers", "vocab"), Case("vocab_pipeline", "vocab", 3)])
SIM = Suite(lambda p: [Case("gpipe", "mlp", 5), Case("1f1b", "mlp", 5), Case("deadlock")], backend="sim",
            network=SimNetwork(alpha=0.0, beta=0.0))


@pytest.mark.task5_1
@pytest.mark.points(2)
def test_boundary_one_microbatch_at_a_time():
    judge(PUBLIC.outcomes(2, "boundary"), *TRAINING_CHECKS)


@pytest.mark.task5_2
@pytest.mark.points(2)
def test_gpipe_matches_one_process_and_bad_batch():
    judge(PUBLIC.outcomes(2, "gpipe"), *TRAINING_CHECKS)
    judge(PUBLIC.outcomes(2, "bad_batch"), bad_batch_problems)


@pytest.mark.task5_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [2, 3])
def test_one_f_one_b_matches_one_process(p):
    judge(PUBLIC.outcomes(p, "1f1b"), *TRAINING_CHECKS)


@pytest.mark.task5_4
@pytest.mark.points(2)
def test_schedules_as_data():
    judge(PUBLIC.outcomes(2, "generators"), generator_problems)
    judge(PUBLIC.outcomes(3, ("sched_gpipe", "sched_1f1b")), *TRAINING_CHECKS)


@pytest.mark.task5_4
@pytest.mark.points(1)
def test_deadlocking_schedule_on_sim():
    judge(SIM.outcomes(2, "deadlock"), deadlock_problems)


@pytest.mark.task5_2
@pytest.mark.points(1)
def test_gpipe_bubble_on_sim():
    judge(SIM.outcomes(3, "gpipe"), timing_problems)


@pytest.mark.task5_5
@pytest.mark.points(2)
def test_checkpointing_same_result_less_saved():
    judge(PUBLIC.outcomes(2, "ckpt_gpipe"), *TRAINING_CHECKS)


@pytest.mark.task5_6
@pytest.mark.points(1)
def test_bonus_data_parallel_over_two_pipeline_replicas():
    judge(GRID.outcomes(4, "data_parallel"), grid_exact_problems, grid_layout_problems)


@pytest.mark.task5_7
@pytest.mark.points(1)
def test_bonus_interleaved_one_f_one_b():
    judge(BONUS.outcomes(2, "interleaved_generators"), interleaved_generator_problems)
    judge(BONUS.outcomes(2, "interleaved"), interleaved_exact_problems, interleaved_message_problems)


@pytest.mark.task5_8
@pytest.mark.points(1)
def test_bonus_vocabulary_layers_sharded_over_two_ranks():
    judge(VOCAB.outcomes(2, "vocab_layers"), layer_problems, layer_message_problems)
    judge(VOCAB.outcomes(2, "vocab_pipeline"), pipeline_problems)
