"""Hidden tests, tasks 1.2-1.7: how the result was computed, from each rank's message counters
(gloo): messages and bytes per rank against each algorithm's formula (cost_model.traffic), every
message received, no provided collective used. The counters live in the rank processes, so each
run's are checked against the bytes the kernel counted between those processes (RunResult.wire,
rank_runs.wire_problems): a run whose counters the kernel contradicts fails every case.

    naive      rank 0 sends and receives p-1 whole buffers, every other rank 1
    tree       busiest rank and totals as cost_model.traffic("tree_all_reduce")
    butterfly  log2 p whole-buffer messages per rank for p a power of two; traffic() otherwise
    ring       exactly 2(p-1) messages per rank, at most one chunk (ceil(n/p) elements) each,
               2(p-1)*n*s bytes in all
"""

import pytest

from assignments.hw1.tests.hw1_checks import judge, traffic_problems
from assignments.hw1.tests.hw1_harness import Case, run_cases
from autograder.hw1.cases import TRAFFIC_WORLD_SIZES, hidden_cases

WIRE_N = 1 << 15         # elements of one more case per function: payload large beside the framing


def measured(fns, p: int) -> list:
    """The outcomes of `fns`' core cases plus a 128 KiB case each, in a launch of their own: the bytes
    the kernel counts between the rank processes during that launch (RunResult.wire) cover only
    these cases, so counters rewritten in the ranks cannot hide in other cases' traffic."""
    cases = [c for c in hidden_cases(p) if c.fn in fns and c.tag == "core"]
    cases += [Case(fn, WIRE_N + 7 * p + 3, seed=95, root=p // 2, tag="core") for fn in fns]
    return run_cases(cases, p)


def check(fns, p):
    judge(measured(fns, p), traffic_problems)


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
