"""Hidden tests, tasks 1.2-1.7: how the result was computed, from each rank's message counters
(gloo): messages and bytes per rank against each algorithm's formula (cost_model.traffic), every
message received, no provided collective used.

    naive      rank 0 sends and receives p-1 whole buffers, every other rank 1
    tree       busiest rank and totals as cost_model.traffic("tree_all_reduce")
    butterfly  log2 p whole-buffer messages per rank for p a power of two; traffic() otherwise
    ring       exactly 2(p-1) messages per rank, at most one chunk (ceil(n/p) elements) each,
               2(p-1)*n*s bytes in all
"""

import pytest

from assignments.hw1.tests.hw1_checks import judge, traffic_problems
from autograder.hw1.cases import GLOO, TRAFFIC_WORLD_SIZES


def check(fns, p):
    judge([o for fn in fns for o in GLOO.outcomes(p, fn, "core")], traffic_problems)


@pytest.mark.task1_2
@pytest.mark.points(3)
@pytest.mark.parametrize("p", TRAFFIC_WORLD_SIZES)
def test_broadcast_and_reduce_messages(p):
    check(["broadcast", "reduce"], p)


@pytest.mark.task1_3
@pytest.mark.points(3)
@pytest.mark.parametrize("p", TRAFFIC_WORLD_SIZES)
def test_reduce_scatter_and_all_gather_messages(p):
    check(["reduce_scatter_", "all_gather_"], p)


@pytest.mark.task1_4
@pytest.mark.points(3)
@pytest.mark.parametrize("p", TRAFFIC_WORLD_SIZES)
def test_naive_all_reduce_messages(p):
    check(["naive_all_reduce"], p)


@pytest.mark.task1_5
@pytest.mark.points(3)
@pytest.mark.parametrize("p", TRAFFIC_WORLD_SIZES)
def test_tree_all_reduce_messages(p):
    check(["tree_all_reduce"], p)


@pytest.mark.task1_6
@pytest.mark.points(3)
@pytest.mark.parametrize("p", TRAFFIC_WORLD_SIZES)
def test_butterfly_all_reduce_messages(p):
    check(["butterfly_all_reduce"], p)


@pytest.mark.task1_7
@pytest.mark.points(4)
@pytest.mark.parametrize("p", TRAFFIC_WORLD_SIZES)
def test_ring_all_reduce_messages(p):
    check(["ring_all_reduce"], p)
