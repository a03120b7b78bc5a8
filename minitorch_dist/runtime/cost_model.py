"""Alpha-beta(-gamma) costs of the algorithms the kit teaches: one place for lectures, docs,
tests and the sim backend.

Notation (see shared ALGORITHMS.md): p ranks, n_bytes the size of the whole vector
on one rank, alpha seconds per message, beta seconds per byte, gamma seconds per
reduced byte (0 unless given). Every function returns seconds.
"""

from __future__ import annotations

import math


def _log2_ceil(p: int) -> int:
    return 0 if p <= 1 else math.ceil(math.log2(p))


def p2p(n_bytes: float, alpha: float, beta: float) -> float:
    """One message of n_bytes: alpha + n*beta."""
    return alpha + n_bytes * beta


def ring_all_reduce(p: int, n_bytes: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Reduce-scatter then all-gather around a ring: 2(p-1)*alpha + 2(p-1)/p*n*beta (+ (p-1)/p*n*gamma)."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n_bytes * beta + (p - 1) / p * n_bytes * gamma


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


def dissemination_barrier(p: int, alpha: float) -> float:
    """Dissemination barrier: ceil(log2 p) zero-byte rounds."""
    return _log2_ceil(p) * alpha
