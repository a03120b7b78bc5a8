"""Homework 1 public tests: one or two cases per task (the hidden tests run many more).

    python -m pytest assignments/hw1/tests                 # every task
    python -m pytest assignments/hw1/tests -m task1_7      # one task (task1_1 .. task1_7)

Your functions run on real processes (gloo) with the provided collectives switched off;
what each rank computed comes back here and is compared with a single-process reference
(hw1_checks.py), so a failure names the case, the rank and the first element that differs.
"""

import pytest

from assignments.hw1.tests.hw1_checks import (expect_close, expect_equal, fit_on_rank, judge, launch_or_fail,
                                              result_problems, sim_time_problems, traffic_problems)
from assignments.hw1.tests.hw1_harness import Case, Suite, rank_ping_pong, run_cases
from minitorch_dist import SimNetwork

ALL_REDUCES = ("naive_all_reduce", "tree_all_reduce", "butterfly_all_reduce", "ring_all_reduce")


def public_cases(p: int) -> list[Case]:
    n = 1000 + 7 * p + 3                      # p does not divide n: chunks differ by one element
    cases = []
    for fn in ALL_REDUCES:
        cases += [Case(fn, n, inputs="constant"), Case(fn, n, seed=1), Case(fn, p - 1, seed=2)]
    cases += [Case("broadcast", n, root=1, seed=3), Case("reduce", n, root=p - 1, seed=4),
              Case("reduce", n, inputs="constant", op="max", root=1)]
    cases += [Case("reduce_scatter_", n, seed=5), Case("all_gather_", n, seed=6),
              Case("reduce_scatter_", p - 1, seed=7), Case("all_gather_", p - 1, seed=8)]
    return cases


PUBLIC = Suite(public_cases)                  # runs once per world size, every selected task


def check(fns, p, *checks):
    judge([o for fn in fns for o in PUBLIC.outcomes(p, fn)], *checks)


@pytest.mark.task1_1
@pytest.mark.points(1)
def test_fit_alpha_beta_exact_data():
    sizes = [0, 1 << 10, 1 << 20, 1 << 24]
    alpha, beta = fit_on_rank(sizes, [3e-6 + n * 2e-10 for n in sizes])
    expect_close("fit_alpha_beta's alpha on exact data", alpha, 3e-6, 1e-9)
    expect_close("fit_alpha_beta's beta on exact data", beta, 2e-10, 1e-9)


@pytest.mark.task1_1
@pytest.mark.points(1)
def test_ping_pong_on_sim_recovers_alpha_beta():
    sizes = [0, 1 << 10, 1 << 20]
    result = launch_or_fail(rank_ping_pong, 2, args=(sizes, 3, 1, 1), backend="sim",
                            network=SimNetwork(alpha=1e-5, beta=1e-9))
    expect_equal("what the peer (rank 1) returns", result[1], {})
    expect_equal("the sizes rank 0 returns (keys of {size: one-way seconds}, in the order given)",
                 list(result[0]), sizes)
    alpha, beta = fit_on_rank(sizes, list(result[0].values()))
    why = f" (sim network alpha 1e-05 s, beta 1e-09 s/B; ping_pong measured {result[0]})"
    expect_close("alpha fitted to ping_pong's times on sim", alpha, 1e-5, 0.01, why)
    expect_close("beta fitted to ping_pong's times on sim", beta, 1e-9, 0.01, why)


@pytest.mark.task1_2
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [3, 4])
def test_broadcast_and_reduce(p):
    check(["broadcast", "reduce"], p, result_problems, traffic_problems)


@pytest.mark.task1_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [3, 4])
def test_reduce_scatter_and_all_gather(p):
    check(["reduce_scatter_", "all_gather_"], p, result_problems, traffic_problems)


@pytest.mark.task1_4
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [3, 4])
def test_naive_all_reduce(p):
    check(["naive_all_reduce"], p, result_problems, traffic_problems)


@pytest.mark.task1_5
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [3, 4])
def test_tree_all_reduce(p):
    check(["tree_all_reduce"], p, result_problems, traffic_problems)


@pytest.mark.task1_6
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [3, 4])
def test_butterfly_all_reduce(p):
    check(["butterfly_all_reduce"], p, result_problems, traffic_problems)


@pytest.mark.task1_7
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [3, 4])
def test_ring_all_reduce(p):
    check(["ring_all_reduce"], p, result_problems, traffic_problems)


@pytest.mark.task1_7
@pytest.mark.points(1)
def test_ring_all_reduce_sim_time_matches_cost_model():
    """On sim, p=64 and n divisible by p: 2(p-1)*alpha + 2(p-1)/p*n*s*beta exactly."""
    network = SimNetwork(alpha=1e-5, beta=1e-9)
    outcome = run_cases([Case("ring_all_reduce", 64 * 16)], 64, backend="sim", network=network)[0]
    judge([outcome], result_problems, lambda o: sim_time_problems(o, network))
