"""Homework 1, task 1.1: measure a network's alpha and beta with a ping-pong.

    python -m minitorch_dist.run -n 2 assignments/hw1/ping_pong.py     # or mpirun -n 2 ...

A message of n bytes takes about t(n) = alpha + n*beta: alpha is the latency of one
message, 1/beta the bandwidth. Rank 0 bounces buffers of several sizes off a peer and
times the round trips (ping_pong); a least-squares line through (size, time) gives
alpha and beta (fit_alpha_beta). The cost model (minitorch_dist.cost_model) then
predicts every algorithm of this homework from those two numbers.
"""

from __future__ import annotations

import statistics

import numpy as np
import torch


def ping_pong(group, sizes_bytes, repeats: int = 10, warmup: int = 2, peer: int = 1) -> dict[int, float]:
    """Measure one-way message times between ranks 0 and `peer` of `group`; every rank calls it.

    Shapes: one uint8 buffer of `size` bytes per size in `sizes_bytes`.
    Steps:  for each size: 1. rank 0 sends the buffer to `peer`; 2. `peer` receives it and
            sends it back; 3. rank 0 receives it; repeat warmup + repeats times and time the
            last `repeats` round trips with group.now() (wall clock; virtual time on sim).
            Other ranks do nothing.
    Cost:   2*(alpha + size*beta) per round trip.

    Returns:
        On rank 0 {size: median round-trip time / 2} in seconds, in the order given;
        {} on every other rank.

    Raises:
        ValueError: a group of fewer than 2 ranks, a peer that is 0 or not in the group,
            repeats < 1 or warmup < 0.
    """
    # BEGIN SOLUTION  (HW1 task 1.1)
    if group.size < 2:
        raise ValueError(f"ping_pong: needs a group of at least 2 ranks, got size {group.size}")
    if isinstance(peer, bool) or not isinstance(peer, int) or not 1 <= peer < group.size:
        raise ValueError(f"ping_pong: peer={peer!r} must be a rank of the group other than 0 "
                         f"(1..{group.size - 1})")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"ping_pong: need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    result: dict[int, float] = {}
    if group.rank not in (0, peer):
        return result
    for size in sizes_bytes:
        size = int(size)
        buf = torch.zeros(size, dtype=torch.uint8, device=group.device)
        one_way = []
        for i in range(warmup + repeats):
            if group.rank == 0:
                start = group.now()
                group.send(buf, peer)                   # 1. ping
                group.recv(buf, peer)                   # 3. pong
                if i >= warmup:
                    one_way.append((group.now() - start) / 2)
            else:
                group.recv(buf, 0)                      # 2. bounce it back
                group.send(buf, 0)
        if group.rank == 0:
            result[size] = statistics.median(one_way)
    return result
    # END SOLUTION


def fit_alpha_beta(sizes_bytes, seconds) -> tuple[float, float]:
    """Least-squares fit of t = alpha + n*beta to measured (size, time) pairs.

    Shapes: sizes_bytes and seconds, k numbers each (k >= 2 with at least two distinct sizes).
    Steps:  1. weight each row by 1/t, so that the fit minimises *relative* residuals
               ((alpha + n*beta - t) / t)^2: timing noise grows with t, and a plain fit lets
               the largest messages swamp alpha (use weight 1 if some t <= 0);
            2. solve the weighted least squares for (alpha, beta) (np.linalg.lstsq);
            3. noise can make alpha < 0: then alpha = 0 and refit beta alone through the
               origin; if beta < 0, beta = 0 and refit alpha alone (clipped at 0).
    Cost:   none (no communication). Exact data gives alpha and beta back exactly.

    Returns:
        (alpha, beta) as Python floats, in seconds and seconds per byte.

    Raises:
        ValueError: different numbers of sizes and times, non-finite values, or fewer than
            two distinct sizes (alpha and beta cannot be told apart).
    """
    # BEGIN SOLUTION  (HW1 task 1.1)
    n = np.asarray(sizes_bytes, dtype=float).ravel()
    t = np.asarray(seconds, dtype=float).ravel()
    if n.shape != t.shape:
        raise ValueError(f"fit_alpha_beta: {n.size} sizes but {t.size} times")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(t))):
        raise ValueError("fit_alpha_beta: sizes and times must be finite numbers")
    if np.unique(n).size < 2:
        raise ValueError(f"fit_alpha_beta: need at least two distinct message sizes to separate "
                         f"alpha from beta, got {np.unique(n).tolist()}; measure more sizes")
    w = 1.0 / t if np.all(t > 0) else np.ones_like(t)                  # 1. (k,) row weights
    A = np.stack([np.ones_like(n), n], axis=1) * w[:, None]             # (k, 2)
    b = t * w                                                           # (k,)
    (alpha, beta), *_ = np.linalg.lstsq(A, b, rcond=None)               # 2.
    if alpha < 0:                                                       # 3.
        alpha, beta = 0.0, np.linalg.lstsq(A[:, 1:], b, rcond=None)[0][0]
    if beta < 0:
        alpha, beta = max(np.linalg.lstsq(A[:, :1], b, rcond=None)[0][0], 0.0), 0.0
    return float(alpha), float(beta)
    # END SOLUTION
