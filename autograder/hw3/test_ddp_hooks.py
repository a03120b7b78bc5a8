"""Hidden tests, task 3.5: HookedDDP and compression_hook.

Three or four SGD steps of a float64 MLP whose gradients fit one bucket, at p 1-4, each step
replayed in the grading process: without a hook, the exact mean of every rank's gradient (the
plain all-reduce of the bucket); TopK(60) of the flat bucket, and TopK(45) with error feedback,
exactly; Uint8Quantizer(50) within half a quantization step. The bytes: the bucket all-reduced,
or the compressor's payload all-gathered, once per step; no point-to-point message. End to end at
p 2: the CharTransformer trained 60 SGD steps with PowerSGD rank 2 (+ error feedback) ends within
0.03 of uncompressed training's loss, top-k of 0.1% with error feedback within 0.07, without it
at least 0.07 above (assignments/hw3/tests/hw3_training.py).
"""

import pytest

from assignments.hw3.tests.hw3_checks import judge
from assignments.hw3.tests.hw3_ddp_checks import hook_problems, training_problems
from autograder.hw3.cases import HOOKS, TRAINING, WORLD_SIZES


@pytest.mark.task3_5
@pytest.mark.points(2)
@pytest.mark.time_limit(150)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_hooked_ddp_without_a_hook_averages(p):
    judge(HOOKS.outcomes(p, "allreduce_ddp"), hook_problems)


@pytest.mark.task3_5
@pytest.mark.points(3)
@pytest.mark.time_limit(150)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_compression_hook_plugs_in_each_compressor(p):
    judge(HOOKS.outcomes(p, "compress_ddp"), hook_problems)


@pytest.mark.task3_5
@pytest.mark.points(2)
@pytest.mark.time_limit(240)
def test_compressed_ddp_trains_the_char_transformer():
    judge(TRAINING.outcomes(2, "char_training"), training_problems)
