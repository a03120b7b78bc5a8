"""Hidden tests, tasks 1.2 and 1.3 on real processes (gloo): binomial broadcast and reduce from
several roots; ring reduce_scatter_ and all_gather_ on flat buffers; the provided wrappers
all_gather and reduce_scatter built on them."""

import pytest

from assignments.hw1.tests.hw1_checks import judge, result_problems
from autograder.hw1.cases import GLOO, LARGE, LARGE_WORLD_SIZES, WORLD_SIZES


def check(fns, p, tags=("core", "sizes"), suite=GLOO):
    judge([o for fn in fns for tag in tags for o in suite.outcomes(p, fn, tag)], result_problems)


@pytest.mark.task1_2
@pytest.mark.points(6)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_broadcast(p):
    check(["broadcast"], p)


@pytest.mark.task1_2
@pytest.mark.points(6)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_reduce(p):
    """The root holds the result; every other rank's x is left unchanged."""
    check(["reduce"], p)


@pytest.mark.task1_2
@pytest.mark.points(2)
@pytest.mark.parametrize("p", (3, 4))
def test_broadcast_and_reduce_dtypes(p):
    check(["broadcast", "reduce"], p, tags=("variant",))


@pytest.mark.task1_3
@pytest.mark.points(6)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_reduce_scatter_(p):
    """Rank r's chunk r holds the combined chunk; the return value is that chunk."""
    check(["reduce_scatter_"], p)


@pytest.mark.task1_3
@pytest.mark.points(6)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_all_gather_(p):
    check(["all_gather_"], p)


@pytest.mark.task1_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", (3, 4))
def test_reduce_scatter_and_all_gather_dtypes(p):
    check(["reduce_scatter_", "all_gather_"], p, tags=("variant",))


@pytest.mark.task1_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", LARGE_WORLD_SIZES)
def test_reduce_scatter_and_all_gather_large_chunks(p):
    """Chunks of 2 MiB and more: a step must send and receive at once (sendrecv), or every rank waits
    in its send for a receive that nobody has posted yet (a deadlock report after the deadline)."""
    check(["reduce_scatter_", "all_gather_"], p, tags=("large",), suite=LARGE)


@pytest.mark.task1_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", (1, 3, 4))
def test_provided_wrappers_all_gather_and_reduce_scatter(p):
    check(["all_gather", "reduce_scatter"], p, tags=("wrapper",))
