"""Hidden tests of FSDP (6.3-6.5) on gloo: parameters after k steps equal one process's; per unit
two all-gathers and one reduce-scatter per step (3 Psi); shards of padded / p; gathered units freed;
prefetch as overlap in the trace; checkpointing cuts saved activations; bf16 compute with float32
master shards, gradients and gathered parameters."""

import pytest

from assignments.hw6.tests.hw6_checks import (checkpoint_problems, comm_problems, judge, memory_problems,
                                              prefetch_problems, result_problems)
from autograder.hw6.cases import CHECKPOINT, FSDP, FSDP_F32, MIXED, PREFETCH, WORLD_PAIRS

CHECKS = (result_problems, comm_problems, memory_problems)


@pytest.mark.task6_3
@pytest.mark.points(2)
@pytest.mark.parametrize("sizes", WORLD_PAIRS, ids=["p1-2", "p3-4"])
def test_fsdp(sizes):
    judge([o for p in sizes for o in FSDP.outcomes(p, "fsdp")], *CHECKS)


@pytest.mark.task6_3
@pytest.mark.points(1)
def test_fsdp_float32_real_optimizer_ranks_start_apart():
    judge(FSDP_F32.outcomes(3, "fsdp"), *CHECKS)


@pytest.mark.task6_3
@pytest.mark.points(3)
def test_fsdp_prefetch_overlaps():
    judge(PREFETCH.outcomes(2, "fsdp_prefetch") + PREFETCH.outcomes(4, "fsdp_prefetch"), *CHECKS, prefetch_problems)


@pytest.mark.task6_4
@pytest.mark.points(3)
def test_fsdp_checkpointing():
    ckpt = CHECKPOINT.outcomes(3, ("fsdp_ckpt", "fsdp_prefetch_ckpt"))
    judge(ckpt, *CHECKS, lambda o: checkpoint_problems(CHECKPOINT.outcomes(3, "fsdp")[0], o))


@pytest.mark.task6_5
@pytest.mark.points(3)
def test_fsdp_mixed_precision():
    judge(MIXED.outcomes(3, ("fsdp_mixed", "fsdp_prefetch_mixed")), *CHECKS)
