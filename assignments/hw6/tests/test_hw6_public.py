"""Homework 6 public tests: a few cases per task (the hidden tests run many more).

    python -m pytest assignments/hw6/tests                 # every task
    python -m pytest assignments/hw6/tests -m task6_3      # one task (task6_1 .. task6_6)

Your sharded pieces train the tiny CharTransformer (hw6_setup.py) for 3 steps on real processes
(gloo). What each rank computed comes back here and is compared with one process on the global
batch (hw6_checks.py): the parameters (float64, 1e-9), each step's collectives (calls and bytes),
and the memory tracker's figures (shards, optimizer state, gradients, gathered units).
"""

import pytest

from assignments.hw6.tests.hw6_checks import (checkpoint_problems, comm_problems, judge, memory_problems,
                                              prefetch_problems, result_problems)
from assignments.hw6.tests.hw6_harness import Case
from assignments.hw6.tests.hw6_hybrid_checks import hybrid_comm_problems
from assignments.hw6.tests.hw6_step_traffic import StepSuite


def public_cases(p: int) -> list[Case]:
    return [Case("zero1"), Case("zero2", optim="sgd"), Case("fsdp"), Case("fsdp", tag="base", for_task="task6_4"), Case("fsdp", prefetch=True, tag="prefetch"),
            Case("fsdp", checkpoint=True), Case("fsdp", mixed=True, dtype="float32", optim="sgd", steps=2)]


# each step's collectives are scored: in a grading each case runs alone, held to its run's counters
# (hw6_step_traffic.py); your own runs launch each suite once per world size
PUBLIC = StepSuite(public_cases)
HYBRID = StepSuite(lambda p: [Case("hsdp", shard_size=2)])                # 4 ranks: 2 shard groups of 2
CHECKS = (result_problems, comm_problems, memory_problems)


@pytest.mark.task6_1
@pytest.mark.points(2)
def test_zero1_sharded_optimizer():
    judge(PUBLIC.outcomes(3, "zero1"), *CHECKS)


@pytest.mark.task6_2
@pytest.mark.points(2)
def test_zero2_sharded_gradients():
    judge(PUBLIC.outcomes(3, "zero2"), *CHECKS)


@pytest.mark.task6_3
@pytest.mark.points(2)
def test_fsdp_units_gather_free_reduce_scatter():
    judge(PUBLIC.outcomes(3, "fsdp", ""), *CHECKS)


@pytest.mark.task6_3
@pytest.mark.points(1)
def test_fsdp_prefetch_overlaps():
    judge(PUBLIC.outcomes(3, "fsdp_prefetch"), *CHECKS, prefetch_problems)


@pytest.mark.task6_4
@pytest.mark.points(2)
def test_fsdp_with_checkpointing():
    ckpt = PUBLIC.outcomes(3, "fsdp_ckpt")
    judge(ckpt, *CHECKS)
    judge(ckpt, lambda o: checkpoint_problems(PUBLIC.outcomes(3, "fsdp", "base")[0], o))


@pytest.mark.task6_5
@pytest.mark.points(2)
def test_mixed_precision_fsdp():
    judge(PUBLIC.outcomes(3, "fsdp_mixed"), *CHECKS)


@pytest.mark.task6_6
@pytest.mark.points(1)
def test_hybrid_sharding_2x2():
    judge(HYBRID.outcomes(4, "hsdp"), result_problems, hybrid_comm_problems, memory_problems)
