"""Cost formulas against hand-computed values and invariants (no processes)."""

import math

import numpy as np
import pytest

from minitorch_dist import cost_model as cm

ALPHA, BETA, N = 1e-5, 1e-9, 1e6           # one message of N bytes: 1.01 ms
MSG = ALPHA + N * BETA
ALL_REDUCE_NAMES = ["naive", "tree", "butterfly", "rabenseifner", "ring"]


# -- hand-computed values (p=4, n=1e6, alpha=1e-5, beta=1e-9) ---------------------------------
@pytest.mark.parametrize("name, expected", [
    ("naive", 6 * MSG),                                  # 2(p-1) full messages through the root
    ("tree", 4 * MSG),                                   # 2 ceil(log2 4) = 4 rounds
    ("butterfly", 2 * MSG),                              # log2 4 = 2 rounds
    ("rabenseifner", 4 * ALPHA + 1.5 * N * BETA),        # 2 log2 p alpha + 2(p-1)/p n beta
    ("ring", 6 * ALPHA + 1.5 * N * BETA),                # 2(p-1) alpha + 2(p-1)/p n beta
])
def test_all_reduce_p4_by_hand(name, expected):
    assert cm.all_reduce_costs(4, N, ALPHA, BETA)[name] == pytest.approx(expected, rel=1e-12)
    assert cm.ALL_REDUCE_ALGORITHMS[name](4, N, ALPHA, BETA) == pytest.approx(expected, rel=1e-12)


def test_other_collectives_by_hand():
    assert cm.p2p(N, ALPHA, BETA) == pytest.approx(1.01e-3)
    assert cm.ring_all_gather(4, N, ALPHA, BETA) == pytest.approx(3e-5 + 0.75e-3)
    assert cm.ring_reduce_scatter(4, N, ALPHA, BETA) == pytest.approx(3e-5 + 0.75e-3)
    assert cm.binomial_broadcast(4, N, ALPHA, BETA) == pytest.approx(2 * MSG)
    assert cm.binomial_reduce(4, N, ALPHA, BETA, gamma=1e-10) == pytest.approx(2 * (MSG + 1e-4))
    assert cm.binomial_broadcast(5, N, ALPHA, BETA) == pytest.approx(3 * MSG)   # ceil(log2 5)
    assert cm.dissemination_barrier(8, ALPHA) == pytest.approx(3 * ALPHA)


def test_non_powers_of_two_by_hand():
    # p=5: q=4 ranks run the power-of-two algorithm, plus two full-size rounds (MPICH)
    assert cm.butterfly_all_reduce(5, N, ALPHA, BETA) == pytest.approx(4 * MSG)
    assert cm.rabenseifner_all_reduce(5, N, ALPHA, BETA) == pytest.approx(4 * ALPHA + 1.5e-3 + 2 * MSG)
    assert cm.tree_all_reduce(6, N, ALPHA, BETA) == pytest.approx(6 * MSG)      # 2 ceil(log2 6)
    assert cm.ring_all_reduce(6, N, ALPHA, BETA) == pytest.approx(10 * ALPHA + 10 / 6 * N * BETA)


def test_gamma_terms_by_hand():
    g = 1e-10
    base = cm.all_reduce_costs(4, N, ALPHA, BETA)
    with_gamma = cm.all_reduce_costs(4, N, ALPHA, BETA, gamma=g)
    reduced_bytes = {"naive": 3 * N, "tree": 2 * N, "butterfly": 2 * N,
                     "rabenseifner": 0.75 * N, "ring": 0.75 * N}
    for name in ALL_REDUCE_NAMES:
        assert with_gamma[name] - base[name] == pytest.approx(reduced_bytes[name] * g)


# -- invariants -------------------------------------------------------------------------------
def test_every_cost_is_zero_for_one_rank():
    assert all(t == 0.0 for t in cm.all_reduce_costs(1, N, ALPHA, BETA, gamma=1e-10).values())
    assert cm.ring_all_gather(1, N, ALPHA, BETA) == 0.0
    assert cm.ring_reduce_scatter(1, N, ALPHA, BETA) == 0.0
    assert cm.binomial_broadcast(1, N, ALPHA, BETA) == 0.0
    assert cm.binomial_reduce(1, N, ALPHA, BETA) == 0.0
    assert cm.dissemination_barrier(1, ALPHA) == 0.0


def test_two_ranks_coincide():
    c = cm.all_reduce_costs(2, N, ALPHA, BETA)
    assert c["naive"] == pytest.approx(c["tree"])                 # root = the only other rank
    assert c["rabenseifner"] == pytest.approx(c["ring"])          # halving = one ring step
    assert c["butterfly"] == pytest.approx(cm.p2p(N, ALPHA, BETA))  # one full exchange
    assert c["butterfly"] == pytest.approx(c["tree"] / 2)         # full duplex: both ways at once


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 8, 16, 1000])
def test_latency_and_bandwidth_regimes(p):
    tiny, huge = cm.all_reduce_costs(p, 0, ALPHA, BETA), cm.all_reduce_costs(p, 1e12, ALPHA, BETA)
    assert tiny["butterfly"] <= tiny["ring"]                      # latency-bound: log rounds win
    assert huge["ring"] <= huge["tree"] <= huge["naive"]          # bandwidth-bound: ring wins
    bw_only = cm.all_reduce_costs(p, N, 0.0, BETA)
    assert bw_only["rabenseifner"] <= bw_only["butterfly"]       # halving moves less data


@pytest.mark.parametrize("p", range(1, 17))
def test_rounds_match_cost_formulas(p):
    # with alpha = 1 and beta = 0 every formula counts its rounds
    for name in ALL_REDUCE_NAMES:
        assert cm.traffic(f"{name}_all_reduce", p, N).rounds == cm.ALL_REDUCE_ALGORITHMS[name](p, N, 1, 0)
    assert cm.traffic("ring_all_gather", p, N).rounds == cm.ring_all_gather(p, N, 1, 0)
    assert cm.traffic("ring_reduce_scatter", p, N).rounds == cm.ring_reduce_scatter(p, N, 1, 0)
    assert cm.traffic("binomial_broadcast", p, N).rounds == cm.binomial_broadcast(p, N, 1, 0)
    assert cm.traffic("binomial_reduce", p, N).rounds == cm.binomial_reduce(p, N, 1, 0)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 7, 8])
def test_ring_all_reduce_traffic(p):
    t = cm.traffic("ring_all_reduce", p, N)
    assert t.messages == 2 * (p - 1)
    assert t.bytes == pytest.approx(2 * (p - 1) / p * N)
    assert t.bytes < 2 * N                                         # bandwidth-optimal
    assert t.total_messages == p * t.messages
    assert t.total_bytes == pytest.approx(p * t.bytes)


@pytest.mark.parametrize("p, n_elems", [(3, 10), (4, 8), (5, 3), (6, 0), (7, 100)])
def test_ring_traffic_against_a_chunk_schedule(p, n_elems):
    # ring schedule: at step k rank r sends chunk (r-k) % p (reduce-scatter), then (r+1-k) % p
    chunks = [len(c) for c in np.array_split(np.arange(n_elems), p)]
    sent = [0] * p
    for r in range(p):
        for k in range(p - 1):
            sent[r] += chunks[(r - k) % p] + chunks[(r + 1 - k) % p]
    t = cm.traffic("ring_all_reduce", p, n_elems)
    assert sum(sent) == t.total_bytes                              # exact for any n
    assert max(sent) <= 2 * (p - 1) * math.ceil(n_elems / p)
    if n_elems % p == 0:
        assert all(s == t.bytes for s in sent)


def test_traffic_of_the_others():
    t = cm.traffic("naive_all_reduce", 4, N)
    assert (t.messages, t.bytes, t.total_messages) == (3, 3 * N, 6)
    t = cm.traffic("butterfly_all_reduce", 8, N)
    assert (t.messages, t.bytes, t.total_messages, t.total_bytes) == (3, 3 * N, 24, 24 * N)
    t = cm.traffic("butterfly_all_reduce", 3, N)                   # 0 -> 1, {1, 2} exchange, 1 -> 0
    assert (t.rounds, t.messages, t.total_messages) == (3, 2, 4)
    t = cm.traffic("rabenseifner_all_reduce", 4, N)
    assert (t.messages, t.bytes, t.total_bytes) == (4, 1.5 * N, 6 * N)
    t = cm.traffic("binomial_broadcast", 8, N)
    assert (t.messages, t.total_messages, t.total_bytes) == (3, 7, 7 * N)
    assert cm.traffic("tree_all_reduce", 1, N) == cm.Traffic(0, 0, 0.0, 0, 0.0)
    with pytest.raises(ValueError, match="unknown algorithm"):
        cm.traffic("ring", 4, N)
    with pytest.raises(ValueError, match="unknown algorithm"):
        cm.traffic("ring", 1, N)


# -- bandwidth (nccl-tests) -------------------------------------------------------------------
def test_bus_bandwidth_factors():
    t = 1e-3
    assert cm.algorithm_bandwidth(N, t) == pytest.approx(1e9)
    assert cm.bus_bandwidth("all_reduce", 4, N, t) == pytest.approx(1e9 * 1.5)
    assert cm.bus_bandwidth("all_gather", 4, N, t) == pytest.approx(1e9 * 0.75)
    assert cm.bus_bandwidth("reduce_scatter", 4, N, t) == pytest.approx(1e9 * 0.75)
    assert cm.bus_bandwidth("broadcast", 4, N, t) == pytest.approx(1e9)
    with pytest.raises(ValueError, match="unknown op"):
        cm.bus_bandwidth("allreduce", 4, N, t)
    with pytest.raises(ValueError, match="seconds"):
        cm.algorithm_bandwidth(N, 0.0)


@pytest.mark.parametrize("p", [2, 3, 8, 64])
def test_ring_bus_bandwidth_approaches_link_bandwidth(p):
    n = 1e13
    busbw = cm.bus_bandwidth("all_reduce", p, n, cm.ring_all_reduce(p, n, ALPHA, BETA))
    assert busbw == pytest.approx(1 / BETA, rel=1e-6)
    assert busbw < 1 / BETA


def test_cost_model_imports_by_the_name_the_docs_use():
    import importlib
    import minitorch_dist
    module = importlib.import_module("minitorch_dist.cost_model")
    assert module is minitorch_dist.cost_model and callable(module.all_reduce_costs)


def test_zero_memory_table_of_the_paper():
    """7.5B parameters, mixed-precision Adam, 64 ranks: 120, 31.4, 16.6 and 1.9 GB per rank."""
    got = cm.zero_memory_per_rank(7.5e9, 64)
    assert [round(got[s] / 1e9, 1) for s in cm.ZERO_STAGES] == [120.0, 31.4, 16.6, 1.9]
    assert cm.zero_memory_per_rank(100, 1) == dict.fromkeys(cm.ZERO_STAGES, 1600)
    with pytest.raises(ValueError):
        cm.zero_memory_per_rank(100, 0)


def test_zero_step_bytes():
    got = cm.zero_step_bytes(1200, 4)
    assert got == {"ddp": 1800, "zero1": 1800, "zero2": 1800, "zero3": 2700}
    assert cm.zero_step_bytes(1200, 1)["zero3"] == 0
