"""Alpha-beta(-gamma) costs of the algorithms the kit teaches: one place for lectures, docs,
tests and the sim backend.

Notation: p ranks, n_bytes the size of the whole vector
on one rank, alpha seconds per message, beta seconds per byte, gamma seconds per
reduced byte (0 unless given). Every cost function returns seconds; links are
full-duplex, so a send and a receive in the same round cost one alpha + n*beta.

Contents, simplest first:
    p2p; all-reduce: naive, tree, butterfly, rabenseifner, ring; broadcast, reduce
    (binomial); all-gather, reduce-scatter (ring); barrier
    all_reduce_costs       every all-reduce algorithm's time, as a dict
    traffic                rounds, messages and bytes an algorithm sends (for counters)
    algorithm_bandwidth, bus_bandwidth     nccl-tests' algbw and busbw
(Measuring alpha and beta is homework 1's task 1.1: minitorch_dist.collectives.ping_pong.)
Tensor parallelism: tensor_parallel.py; ZeRO and FSDP: zero.py (this package's other modules).

Non-powers of two (MPICH): q = largest power of two <= p, r = p - q. The first 2r
ranks pair up, the even ones hand their buffer to their odd neighbour and sit out,
q ranks run the power-of-two algorithm, the result goes back: two extra full-size rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


__all__ = ["p2p", "naive_all_reduce", "tree_all_reduce", "butterfly_all_reduce", "rabenseifner_all_reduce",
           "ring_all_reduce", "ALL_REDUCE_ALGORITHMS", "all_reduce_costs", "ring_all_gather", "ring_reduce_scatter",
           "binomial_broadcast", "binomial_reduce", "dissemination_barrier", "Traffic", "traffic",
           "algorithm_bandwidth", "bus_bandwidth"]


def _log2_ceil(p: int) -> int:
    return 0 if p <= 1 else math.ceil(math.log2(p))


def _pow2_floor(p: int) -> tuple[int, int]:
    """(q, log2 q) with q the largest power of two <= p (p >= 1)."""
    k = int(p).bit_length() - 1          # int(): numpy integers have no bit_length
    return 1 << k, k


def p2p(n_bytes: float, alpha: float, beta: float) -> float:
    """One message of n_bytes: alpha + n*beta."""
    return alpha + n_bytes * beta


# -- all-reduce ------------------------------------------------------------------------------
def naive_all_reduce(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Gather to root, root sums, root broadcasts, one message at a time.

    Cost: 2(p-1)*(alpha + n*beta) + (p-1)*n*gamma   (the root is the bottleneck)
    """
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * (alpha + n_bytes * beta) + (p - 1) * n_bytes * gamma


def tree_all_reduce(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast, full buffers.

    Cost: 2*ceil(log2 p)*(alpha + n*beta) + ceil(log2 p)*n*gamma
    """
    k = _log2_ceil(p)
    return 2 * k * (alpha + n_bytes * beta) + k * n_bytes * gamma


def butterfly_all_reduce(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Recursive doubling: in round k, exchange the whole buffer with rank ^ 2^k and add.

    Cost, p a power of two: log2 p * (alpha + n*beta + n*gamma).
    Other p (MPICH): (log2 q + 2)*(alpha + n*beta) + (log2 q + 1)*n*gamma, q = 2^floor(log2 p).
    """
    if p <= 1:
        return 0.0
    q, k = _pow2_floor(p)
    extra = 0 if q == p else 1
    return (k + 2 * extra) * (alpha + n_bytes * beta) + (k + extra) * n_bytes * gamma


def rabenseifner_all_reduce(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Recursive-halving reduce-scatter, then recursive-doubling all-gather (Rabenseifner 2004).

    Cost, p a power of two: 2*log2 p*alpha + 2(p-1)/p*n*beta + (p-1)/p*n*gamma.
    Other p (MPICH): the same with q = 2^floor(log2 p), plus 2*(alpha + n*beta) + n*gamma.
    """
    if p <= 1:
        return 0.0
    q, k = _pow2_floor(p)
    t = 2 * k * alpha + 2 * (q - 1) / q * n_bytes * beta + (q - 1) / q * n_bytes * gamma
    if q != p:
        t += 2 * (alpha + n_bytes * beta) + n_bytes * gamma
    return t


def ring_all_reduce(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Reduce-scatter then all-gather around a ring: 2(p-1)*alpha + 2(p-1)/p*n*beta (+ (p-1)/p*n*gamma)."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n_bytes * beta + (p - 1) / p * n_bytes * gamma


ALL_REDUCE_ALGORITHMS = {
    "naive": naive_all_reduce,
    "tree": tree_all_reduce,
    "butterfly": butterfly_all_reduce,
    "rabenseifner": rabenseifner_all_reduce,
    "ring": ring_all_reduce,
}


def all_reduce_costs(p: int, n_bytes: float, alpha: float, beta: float,
                     gamma: float = 0.0) -> dict[str, float]:
    """Every all-reduce algorithm's time: {"naive": s, "tree": s, "butterfly": s, "rabenseifner": s, "ring": s}."""
    return {name: f(p, n_bytes, alpha, beta, gamma) for name, f in ALL_REDUCE_ALGORITHMS.items()}


# -- other collectives -----------------------------------------------------------------------
def ring_all_gather(p: int, n_bytes: float, alpha: float, beta: float) -> float:
    """All-gather of a result of n_bytes (each rank contributes n/p): (p-1)*alpha + (p-1)/p*n*beta."""
    if p <= 1:
        return 0.0
    return (p - 1) * alpha + (p - 1) / p * n_bytes * beta


def ring_reduce_scatter(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Reduce-scatter of an input of n_bytes: (p-1)*alpha + (p-1)/p*n*(beta + gamma)."""
    if p <= 1:
        return 0.0
    return (p - 1) * alpha + (p - 1) / p * n_bytes * (beta + gamma)


def binomial_broadcast(p: int, n_bytes: float, alpha: float, beta: float) -> float:
    """Binomial tree broadcast: ceil(log2 p) * (alpha + n*beta)."""
    return _log2_ceil(p) * (alpha + n_bytes * beta)


def binomial_reduce(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial tree reduce to one root: ceil(log2 p) * (alpha + n*beta + n*gamma)."""
    return _log2_ceil(p) * (alpha + n_bytes * beta + n_bytes * gamma)


def dissemination_barrier(p: int, alpha: float) -> float:
    """Dissemination barrier: ceil(log2 p) zero-byte rounds."""
    return _log2_ceil(p) * alpha


# -- traffic: what the counters should show --------------------------------------------------
@dataclass(frozen=True)
class Traffic:
    """Messages and bytes an algorithm sends (received totals are the same).

    rounds:         communication steps on the critical path
    messages/bytes: sent by the busiest rank
    total_messages/total_bytes: sent by all ranks together
    Ring and Rabenseifner split the buffer in chunks: `bytes` assumes they are equal
    (p divides n); otherwise ranks differ by a few elements. Totals are exact for any n.
    """

    rounds: int
    messages: int
    bytes: float
    total_messages: int
    total_bytes: float


def traffic(algorithm: str, p: int, n_bytes: float) -> Traffic:
    """Traffic of `algorithm`, named like its cost function ("ring_all_reduce", "binomial_broadcast", ...).

    ring_all_reduce: 2(p-1) rounds, 2(p-1) messages and 2(p-1)/p*n bytes per rank.
    n_bytes as in the cost function (the full vector; for all-gather the full result).
    """
    n = n_bytes
    k = _log2_ceil(p)
    q, kq = _pow2_floor(max(p, 1))
    r = p - q
    extra = 1 if r else 0
    table = {
        "naive_all_reduce": (2 * (p - 1), p - 1, (p - 1) * n, 2 * (p - 1), 2 * (p - 1) * n),
        "tree_all_reduce": (2 * k, k, k * n, 2 * (p - 1), 2 * (p - 1) * n),
        "butterfly_all_reduce": (kq + 2 * extra, kq + extra, (kq + extra) * n,
                                 q * kq + 2 * r, (q * kq + 2 * r) * n),
        "rabenseifner_all_reduce": (2 * kq + 2 * extra, 2 * kq + extra, 2 * (q - 1) / q * n + extra * n,
                                    2 * q * kq + 2 * r, 2 * (q - 1) * n + 2 * r * n),
        "ring_all_reduce": (2 * (p - 1), 2 * (p - 1), 2 * (p - 1) / p * n, 2 * p * (p - 1), 2 * (p - 1) * n),
        "ring_all_gather": (p - 1, p - 1, (p - 1) / p * n, p * (p - 1), (p - 1) * n),
        "ring_reduce_scatter": (p - 1, p - 1, (p - 1) / p * n, p * (p - 1), (p - 1) * n),
        "binomial_broadcast": (k, k, k * n, p - 1, (p - 1) * n),
        "binomial_reduce": (k, 1, n, p - 1, (p - 1) * n),
    }
    if algorithm not in table:
        raise ValueError(f"traffic: unknown algorithm {algorithm!r}; known: {sorted(table)}")
    if p <= 1:
        return Traffic(0, 0, 0.0, 0, 0.0)
    return Traffic(*table[algorithm])


# -- bandwidth as nccl-tests reports it ------------------------------------------------------
_BUS_FACTORS = {
    "all_reduce": lambda p: 2 * (p - 1) / p,
    "all_gather": lambda p: (p - 1) / p,
    "reduce_scatter": lambda p: (p - 1) / p,
    "broadcast": lambda p: 1.0,
    "reduce": lambda p: 1.0,
}


def algorithm_bandwidth(n_bytes: float, seconds: float) -> float:
    """algbw = S / t in bytes per second (S: the buffer size nccl-tests reports)."""
    if not seconds > 0:
        raise ValueError(f"algorithm_bandwidth: seconds must be > 0, got {seconds}")
    return n_bytes / seconds


def bus_bandwidth(op: str, p: int, n_bytes: float, seconds: float) -> float:
    """busbw = algbw * factor, comparable across p; its ceiling is the link bandwidth 1/beta.

    factor: all_reduce 2(p-1)/p; all_gather, reduce_scatter (p-1)/p (n_bytes = the full
    gathered / scattered buffer); broadcast, reduce 1.
    """
    if op not in _BUS_FACTORS:
        raise ValueError(f"bus_bandwidth: unknown op {op!r}; known: {sorted(_BUS_FACTORS)}")
    return algorithm_bandwidth(n_bytes, seconds) * _BUS_FACTORS[op](p)
