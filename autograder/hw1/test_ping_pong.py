"""Hidden tests, task 1.1: fit_alpha_beta on exact and noisy data; ping_pong's message pattern
with a fake group whose clock charges alpha + n*beta per message; ping_pong on sim (the fit
recovers the network's alpha and beta) and on real processes (gloo)."""

import math

import numpy as np
import pytest
import torch
from hw1_checks import fail, launch_or_fail, student_call
from hw1_harness import rank_ping_pong

from minitorch_dist import SimNetwork

ALPHA, BETA = 2e-6, 1e-10           # 2 us per message, 10 GB/s


def fit(sizes, seconds):
    from minitorch_dist.collectives import fit_alpha_beta
    return student_call(fit_alpha_beta, sizes, seconds)


def ping_pong(*args, **kwargs):
    from minitorch_dist.collectives import ping_pong
    return student_call(ping_pong, *args, **kwargs)


# -- fitting alpha and beta -------------------------------------------------------------------
@pytest.mark.task1_1
@pytest.mark.points(2)
@pytest.mark.parametrize("alpha,beta", [(ALPHA, BETA), (5e-5, 1e-9), (1e-3, 4e-8)])
def test_fit_recovers_exact_parameters(alpha, beta):
    sizes = [0, 1, 2**10, 2**14, 2**18, 2**22, 2**24]
    got = fit(sizes, [alpha + n * beta for n in sizes])
    assert isinstance(got, tuple) and len(got) == 2, f"fit_alpha_beta must return (alpha, beta), got {got!r}"
    assert got == (pytest.approx(alpha, rel=1e-9), pytest.approx(beta, rel=1e-9))


@pytest.mark.task1_1
@pytest.mark.points(2)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_within_5_percent_under_3_percent_noise(seed):
    """Relative residuals: the largest messages must not swamp alpha."""
    rng = np.random.default_rng(seed)
    sizes = np.repeat(np.logspace(0, 7, 15), 5)                   # 1 B .. 10 MB, 5 repeats
    t = (ALPHA + sizes * BETA) * (1 + 0.03 * rng.standard_normal(sizes.size))
    alpha, beta = fit(sizes, t)
    assert alpha == pytest.approx(ALPHA, rel=0.05)
    assert beta == pytest.approx(BETA, rel=0.05)


@pytest.mark.task1_1
@pytest.mark.points(1)
def test_fit_clips_a_negative_intercept():
    sizes = np.array([1e4, 1e5, 1e6])
    alpha, beta = fit(sizes, sizes * BETA - 1e-8)                    # intercept -0.01 us
    assert alpha == 0.0
    assert beta == pytest.approx(BETA, rel=0.01)


@pytest.mark.task1_1
@pytest.mark.points(1)
@pytest.mark.parametrize("sizes,seconds", [([1024], [1e-5]), ([1024] * 3, [1e-5, 1.1e-5, 0.9e-5]),
                                           ([1, 2, 3], [1e-5, 2e-5]), ([1, 2], [1e-5, float("nan")])],
                         ids=["one-size", "one-distinct-size", "lengths-differ", "nan"])
def test_fit_rejects_bad_input(sizes, seconds):
    with pytest.raises(ValueError):
        fit(sizes, seconds)


# -- ping_pong with a fake group --------------------------------------------------------------
class FakeGroup:
    """A rank's view with a fake clock: each send or recv of n bytes takes alpha + n*beta."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size
        self.calls = []
        self.clock = 0.0

    def now(self):
        return self.clock

    def send(self, tensor, dst, tag=0):
        self.calls.append(("send", dst, tensor.dtype, tensor.numel()))
        self.clock += ALPHA + tensor.numel() * BETA

    def recv(self, tensor, src, tag=0):
        self.calls.append(("recv", src, tensor.dtype, tensor.numel()))
        self.clock += ALPHA + tensor.numel() * BETA
        return tensor

    def isend(self, tensor, dst, tag=0):
        self.send(tensor, dst, tag)
        return _Done()

    def irecv(self, tensor, src, tag=0):
        self.recv(tensor, src, tag)
        return _Done()


class _Done:
    def wait(self):
        return None


@pytest.mark.task1_1
@pytest.mark.points(2)
def test_ping_pong_rank0_measures_one_way_time():
    g = FakeGroup(rank=0, size=3)
    sizes = [0, 1000, 10**6]
    times = ping_pong(g, sizes, repeats=3, warmup=1, peer=2)
    assert list(times) == sizes, f"ping_pong must return {{size: seconds}} in the order given, got {times!r}"
    for n in sizes:
        assert times[n] == pytest.approx(ALPHA + n * BETA), f"one-way time of {n} B"
    assert g.calls[:2] == [("send", 2, torch.uint8, 0), ("recv", 2, torch.uint8, 0)]
    assert len(g.calls) == 2 * 4 * len(sizes), "(warmup + repeats) round trips per size"


@pytest.mark.task1_1
@pytest.mark.points(1)
def test_ping_pong_peer_echoes_and_others_idle():
    peer = FakeGroup(rank=1, size=3)
    assert ping_pong(peer, [8, 16], repeats=2, warmup=0) == {}
    assert peer.calls == [("recv", 0, torch.uint8, 8), ("send", 0, torch.uint8, 8)] * 2 + \
                         [("recv", 0, torch.uint8, 16), ("send", 0, torch.uint8, 16)] * 2
    idle = FakeGroup(rank=2, size=3)
    assert ping_pong(idle, [8, 16]) == {} and idle.calls == []


@pytest.mark.task1_1
@pytest.mark.points(1)
@pytest.mark.parametrize("size,kwargs", [(1, {}), (3, {"peer": 3}), (3, {"peer": 0}), (2, {"repeats": 0})],
                         ids=["one-rank", "peer-out-of-range", "peer-is-0", "no-repeats"])
def test_ping_pong_rejects_bad_arguments(size, kwargs):
    with pytest.raises(ValueError):
        ping_pong(FakeGroup(0, size), [8], **kwargs)


# -- ping_pong on ranks -----------------------------------------------------------------------
@pytest.mark.task1_1
@pytest.mark.points(2)
@pytest.mark.parametrize("p,peer,alpha,beta", [(2, 1, 5e-6, 1e-10), (3, 2, 1e-4, 2e-9)])
def test_ping_pong_on_sim_recovers_alpha_beta(p, peer, alpha, beta):
    sizes = [0, 1 << 10, 1 << 16, 1 << 20]
    result = launch_or_fail(rank_ping_pong, p, args=(sizes, 3, 1, peer), backend="sim",
                            network=SimNetwork(alpha=alpha, beta=beta))
    if any(result[r] for r in range(1, p)):
        fail(f"ranks other than 0 must return {{}}, got {list(result)[1:]}")
    if list(result[0]) != sizes:
        fail(f"rank 0 must return {{size: seconds}} for sizes {sizes}, got {result[0]!r}")
    got = fit(sizes, [result[0][n] for n in sizes])
    if not (math.isclose(got[0], alpha, rel_tol=0.01) and math.isclose(got[1], beta, rel_tol=0.01)):
        fail(f"on sim with alpha={alpha:g}, beta={beta:g}: ping_pong measured {result[0]} and the fit gave "
             f"alpha={got[0]:g}, beta={got[1]:g} (1% tolerance)")


@pytest.mark.task1_1
@pytest.mark.points(1)
def test_ping_pong_on_gloo():
    sizes = [8, 1 << 16]
    result = launch_or_fail(rank_ping_pong, 2, args=(sizes, 3, 1, 1))
    times = result[0]
    if result[1] != {} or list(times) != sizes:
        fail(f"rank 0 must return {{size: seconds}} for sizes {sizes} and rank 1 {{}}, got {list(result)}")
    if not all(0 < t < 1 and math.isfinite(t) for t in times.values()):
        fail(f"one-way times must be positive seconds, got {times}")
    sent = result.counters[0].messages_sent
    if sent != 4 * len(sizes) or result.counters[1].messages_sent != sent:
        fail(f"with repeats=3, warmup=1 each rank sends 4 messages per size ({4 * len(sizes)}); rank 0 sent "
             f"{sent}, rank 1 {result.counters[1].messages_sent}")
