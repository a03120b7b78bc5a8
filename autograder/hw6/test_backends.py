"""Hidden tests on the other backends and bad input: FSDP on sim at p = 3 (threads, virtual clock) and
on mpi at p = 2 (ranks started by mpiexec), the same checks as on gloo; bad arguments raise
errors that name them."""

import pytest

from assignments.hw6.tests.hw6_checks import (bad_input_problems, comm_problems, judge, memory_problems,
                                              result_problems)
from autograder.hw6.cases import BAD, MPI, SIM

CHECKS = (result_problems, comm_problems, memory_problems)


@pytest.mark.bound_to("test_fsdp_prefetch_overlaps")
@pytest.mark.task6_3
@pytest.mark.points(1)
def test_fsdp_prefetch_on_sim():
    judge(SIM.outcomes(3, "fsdp_prefetch"), *CHECKS)


@pytest.mark.bound_to("test_fsdp_checkpointing")
@pytest.mark.task6_4
@pytest.mark.points(1)
def test_fsdp_checkpointing_on_mpi():
    judge(MPI.outcomes(2, "fsdp_ckpt"), *CHECKS)


@pytest.mark.task6_1
@pytest.mark.points(1)
def test_zero_rejects_an_optimizer_name():
    judge(BAD.outcomes(1, "bad_zero"), bad_input_problems)


@pytest.mark.task6_3
@pytest.mark.points(1)
def test_fsdp_rejects_a_model_without_blocks():
    judge(BAD.outcomes(1, "bad_fsdp"), bad_input_problems)
