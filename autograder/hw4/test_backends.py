"""Hidden tests on the other backends: sim at TP size 6 (config B: one head and 8 vocabulary rows
per rank) and mpi at TP size 2 (ranks started by mpiexec, one job). The same checks as on gloo:
results equal the dense model's, exact communication per pass. Each case carries its task."""

import pytest

from assignments.hw4.tests.hw4_checks import comm_problems, judge, result_problems
from autograder.hw4.cases import MPI, MPI_KINDS, MPI_WORLD_SIZE, SIM, SIM_KINDS, SIM_WORLD_SIZE


def by_task(kinds: dict):
    return [pytest.param(task, marks=getattr(pytest.mark, task), id=task) for task in kinds]


@pytest.mark.bound_to("test_comm_ops_forward_and_backward",
                      "test_mlp_attention_and_block_match_dense",
                      "test_two_layer_model_loss_and_gradients_match_dense")
@pytest.mark.points(3)
@pytest.mark.parametrize("task", by_task(SIM_KINDS))
def test_on_sim_at_tp_size_6(task):
    judge(SIM.outcomes(SIM_WORLD_SIZE, SIM_KINDS[task]), result_problems, comm_problems)


@pytest.mark.bound_to("test_mlp_attention_and_block_match_dense",
                      "test_embedding_and_cross_entropy_match_dense_with_three_all_reduces",
                      "test_two_layer_model_loss_and_gradients_match_dense")
@pytest.mark.mpi
@pytest.mark.points(3)
@pytest.mark.time_limit(120)
@pytest.mark.parametrize("task", by_task(MPI_KINDS))
def test_on_mpi(task):
    judge(MPI.outcomes(MPI_WORLD_SIZE, MPI_KINDS[task]), result_problems, comm_problems)
