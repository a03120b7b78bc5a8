"""Hidden tests, tasks 1.2-1.7, on the two other backends: sim (threads with a virtual clock,
world sizes 1..8) and mpi (ranks started by mpiexec, p = 3; one graded function whose cases
carry their tasks). Core cases and edge sizes."""

import pytest

from assignments.hw1.tests.hw1_checks import judge, result_problems, traffic_problems
from autograder.hw1.cases import MPI, MPI_WORLD_SIZE, SIM, WORLD_SIZES


def check(suite, fns, p, checks=(result_problems,)):
    judge([o for fn in fns for o in suite.outcomes(p, fn)], *checks)


@pytest.mark.bound_to("test_broadcast", "test_reduce")
@pytest.mark.task1_2
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_broadcast_and_reduce_on_sim(p):
    check(SIM, ["broadcast", "reduce"], p)


@pytest.mark.bound_to("test_reduce_scatter_", "test_all_gather_")
@pytest.mark.task1_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_reduce_scatter_and_all_gather_on_sim(p):
    check(SIM, ["reduce_scatter_", "all_gather_", "all_gather", "reduce_scatter"], p)


@pytest.mark.bound_to("test_naive_all_reduce")
@pytest.mark.task1_4
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_naive_all_reduce_on_sim(p):
    check(SIM, ["naive_all_reduce"], p)


@pytest.mark.bound_to("test_tree_all_reduce")
@pytest.mark.task1_5
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_tree_all_reduce_on_sim(p):
    check(SIM, ["tree_all_reduce"], p)


@pytest.mark.bound_to("test_butterfly_all_reduce")
@pytest.mark.task1_6
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_butterfly_all_reduce_on_sim(p):
    check(SIM, ["butterfly_all_reduce"], p)


@pytest.mark.bound_to("test_ring_all_reduce")
@pytest.mark.task1_7
@pytest.mark.points(2)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_ring_all_reduce_on_sim(p):
    check(SIM, ["ring_all_reduce"], p)


MPI_FNS = {"task1_2": ["broadcast", "reduce"], "task1_3": ["reduce_scatter_", "all_gather_"],
           "task1_4": ["naive_all_reduce"], "task1_5": ["tree_all_reduce"],
           "task1_6": ["butterfly_all_reduce"], "task1_7": ["ring_all_reduce"]}


# One graded function for mpi (one mpiexec job for every algorithm); each case carries its task.
MPI_CASES = [pytest.param(fns, marks=getattr(pytest.mark, task), id=task) for task, fns in MPI_FNS.items()]


@pytest.mark.bound_to("test_broadcast", "test_reduce", "test_reduce_scatter_", "test_all_gather_",
                      "test_naive_all_reduce", "test_tree_all_reduce", "test_butterfly_all_reduce",
                      "test_ring_all_reduce")
@pytest.mark.mpi
@pytest.mark.points(12)
@pytest.mark.time_limit(180)
@pytest.mark.parametrize("fns", MPI_CASES)
def test_every_algorithm_on_mpi(fns):
    check(MPI, fns, MPI_WORLD_SIZE, (result_problems, traffic_problems))
