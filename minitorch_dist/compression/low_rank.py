"""Provided pieces of homework 3, task 3.4 (PowerSGD): the state a hook keeps between steps, which
matrices are worth compressing, the order they are taken in, and the random start of Q.

They follow torch's `torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook` exactly, so that
your hook and torch's give the same averaged gradients from the same gradients and seed:

    state = PowerSGDState(group, matrix_approximation_rank=2, start_powerSGD_iter=2, random_seed=0)
    model.register_comm_hook(state, powersgd_hook)          # HookedDDP (task 3.5)

Which tensors are compressed. A gradient of shape (n, ...) is viewed as a matrix (n, m) with
m = numel / n. Its rank is r = min(n, m, matrix_approximation_rank). It is compressed when
    (n + m) r * min_compression_rate < n m
(the low-rank factors are at least `min_compression_rate` times smaller); the others (every vector:
m = 1, and small matrices) are averaged with one plain all-reduce. Bytes per compressed matrix and
rank: (n + m) r elements (P then Q), against n m for the dense gradient.

Order. The matrices to compress are taken grouped by shape: the shapes in the order they first
occur in the bucket, and within a shape in bucket order (`by_shape`). P and Q of every matrix live
in one flat tensor each, (sum n r,) and (sum m r,), in that order, so that one all-reduce carries
all of them.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["PowerSGDState", "should_compress", "by_shape", "random_qs"]


class PowerSGDState:
    """What a PowerSGD hook keeps between steps, one per model (torch's PowerSGDState, same meaning).

    Args:
        group: the Group the hook averages over.
        matrix_approximation_rank: r >= 1 (clamped per matrix to min(n, m)).
        start_powerSGD_iter: steps of plain all-reduce before compression starts; > 1 when error
            feedback or warm start is on (the first steps fill the residuals and P, Q memories).
        min_compression_rate: > 0; see `should_compress`.
        use_error_feedback: keep, per bucket, the residual e = (g + e) - what was applied.
        warm_start: reuse last step's Q (per bucket) instead of a new random one.
        orthogonalization_epsilon: added to each column norm when orthogonalizing (0: none).
        random_seed: seeds `rng`; every rank uses the same, so random Qs agree.
    Fields you use: error_dict, p_memory_dict, q_memory_dict ({bucket index: flat tensor}), iter (the
    steps done, counted at each step's last bucket: maybe_increase_iter), rng.
    """

    def __init__(self, group, matrix_approximation_rank: int = 1, start_powerSGD_iter: int = 1000,
                 min_compression_rate: float = 2, use_error_feedback: bool = True, warm_start: bool = True,
                 orthogonalization_epsilon: float = 0, random_seed: int = 0):
        rank = matrix_approximation_rank
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"PowerSGDState: matrix_approximation_rank must be an int >= 1, got {rank!r}")
        if not min_compression_rate > 0:
            raise ValueError(f"PowerSGDState: min_compression_rate must be > 0, got {min_compression_rate!r}")
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError("PowerSGDState: start_powerSGD_iter must be > 1 when use_error_feedback or warm_start "
                             f"is on (got {start_powerSGD_iter}): the first steps run the plain all-reduce")
        self.group = group
        self.matrix_approximation_rank = rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)
        self.error_dict: dict[int, torch.Tensor] = {}
        self.p_memory_dict: dict[int, torch.Tensor] = {}
        self.q_memory_dict: dict[int, torch.Tensor] = {}
        self.iter = 0

    def maybe_increase_iter(self, bucket) -> None:
        """Count a step when its last bucket has been through the hook."""
        if bucket.is_last():
            self.iter += 1


def should_compress(n: int, m: int, rank: int, min_compression_rate: float) -> bool:
    """True when the rank-`rank` factors of an (n, m) matrix are worth sending instead of it."""
    return (n + m) * rank * min_compression_rate < n * m


def by_shape(matrices: list[torch.Tensor]) -> list[torch.Tensor]:
    """The matrices grouped by shape: shapes in order of first occurrence, bucket order within one."""
    groups: dict[tuple, list[torch.Tensor]] = {}
    for m in matrices:
        groups.setdefault(tuple(m.shape), []).append(m)
    return [m for group in groups.values() for m in group]


def random_qs(state: PowerSGDState, qs: list[torch.Tensor]) -> None:
    """Fill each Q (m, r) with standard normal values, the same on every rank and new at every call:
    a seed is drawn from state.rng, and the global torch generator is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(state.rng.randint(1_000_000_000))
        for q in qs:
            q.copy_(torch.randn(*q.shape, dtype=q.dtype))
