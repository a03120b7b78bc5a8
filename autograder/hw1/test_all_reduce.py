"""Hidden tests, tasks 1.4-1.7: the four all-reduces give the right result on real processes (gloo).

Each algorithm: world sizes 1..8 with closed-form and random inputs, n = 0, 1, p-1, a large n
that p does not divide, a 2-D and a 0-dim x (partial credit per world size); then other dtypes
and ops at p = 3 and 4 (partial credit per variant). Every case also checks the in-place
contract (returns x itself) and that every rank holds exactly the same bits.
"""

import pytest

from assignments.hw1.tests.hw1_checks import judge, result_problems
from autograder.hw1.cases import GLOO, VARIANT_WORLD_SIZES, VARIANTS, WORLD_SIZES


def check_world_size(fn: str, p: int) -> None:
    judge(GLOO.outcomes(p, fn, "core") + GLOO.outcomes(p, fn, "sizes"), result_problems)


def check_variant(fn: str, variant: str) -> None:
    judge([o for p in VARIANT_WORLD_SIZES for o in GLOO.outcomes(p, fn, f"variant:{variant}")],
          result_problems)


@pytest.mark.task1_4
@pytest.mark.points(6)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_naive_all_reduce(p):
    check_world_size("naive_all_reduce", p)


@pytest.mark.task1_4
@pytest.mark.points(3)
@pytest.mark.parametrize("variant", VARIANTS)
def test_naive_all_reduce_dtypes_and_ops(variant):
    check_variant("naive_all_reduce", variant)


@pytest.mark.task1_5
@pytest.mark.points(6)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_tree_all_reduce(p):
    check_world_size("tree_all_reduce", p)


@pytest.mark.task1_5
@pytest.mark.points(3)
@pytest.mark.parametrize("variant", VARIANTS)
def test_tree_all_reduce_dtypes_and_ops(variant):
    check_variant("tree_all_reduce", variant)


@pytest.mark.task1_6
@pytest.mark.points(8)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_butterfly_all_reduce(p):
    check_world_size("butterfly_all_reduce", p)


@pytest.mark.task1_6
@pytest.mark.points(3)
@pytest.mark.parametrize("variant", VARIANTS)
def test_butterfly_all_reduce_dtypes_and_ops(variant):
    check_variant("butterfly_all_reduce", variant)


@pytest.mark.task1_7
@pytest.mark.points(8)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_ring_all_reduce(p):
    check_world_size("ring_all_reduce", p)


@pytest.mark.task1_7
@pytest.mark.points(3)
@pytest.mark.parametrize("variant", VARIANTS)
def test_ring_all_reduce_dtypes_and_ops(variant):
    check_variant("ring_all_reduce", variant)
