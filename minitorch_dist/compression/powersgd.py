"""Homework 3, task 3.4: PowerSGD, a rank-r approximation of each gradient matrix, all-reduced.

For a gradient matrix M (n, m) on every rank and a Q (m, r) that every rank shares:

    P = M Q              all-reduce P (sum over ranks: P = (sum_r M_r) Q)
    P <- orthogonalize(P)            (columns orthonormal: Gram-Schmidt)
    Q = M^T P            all-reduce Q, divide by p: Q = mean_r(M_r)^T P
    M_avg ~= P Q^T       the projection of the mean gradient onto span(P)

Bytes on the wire per matrix and step: (n + m) r elements instead of n m. With warm start, Q is
last step's (one power iteration per step keeps refining the subspace); otherwise, and the first
time, a random Q (low_rank.random_qs). With error feedback, what the approximation dropped is kept
per bucket and added to the next step's gradients: e <- (g + e) - what was applied. Vectors and
small matrices (low_rank.should_compress) are averaged exactly, with one plain all-reduce.

This is torch's powerSGD_hook (torch.distributed.algorithms.ddp_comm_hooks), the same state and the
same arithmetic: the same gradients and seed give the same averaged gradients.
"""

from __future__ import annotations

import torch

from minitorch_dist.compression.grad_bucket import Future, GradBucket, allreduce_hook
from minitorch_dist.compression.low_rank import PowerSGDState, by_shape, random_qs, should_compress

__all__ = ["orthogonalize_", "powersgd_hook"]


def orthogonalize_(matrix: torch.Tensor, epsilon: float = 0.0) -> torch.Tensor:
    """In place, Gram-Schmidt on the columns of `matrix` (n, r), r <= n; returns it.

    For each column i in order: divide it by its norm (+ epsilon when epsilon > 0; a column of
    zeros with epsilon 0 becomes zeros, not nan), then subtract from every later column its
    projection on column i.
    """
    # BEGIN YOUR CODE  (HW3 task 3.4)
    raise NotImplementedError("HW3 task 3.4: orthogonalize_ is not implemented yet (see assignments/hw3/README.md)")
    # END YOUR CODE


def powersgd_hook(state: PowerSGDState, bucket: GradBucket) -> Future:
    """The bucket averaged over state.group with PowerSGD (module docstring); torch's powerSGD_hook.

    Steps (b = bucket.index(), p = group size):
      1. while state.iter < state.start_powerSGD_iter: state.maybe_increase_iter(bucket) and return
         allreduce_hook(state.group, bucket).
      2. error feedback: buffer += state.error_dict[b] (create zeros the first time); keep a copy of
         buffer (what this rank wanted to apply).
      3. each gradient of bucket.gradients() as a matrix (n, m) = g.view(g.shape[0], -1), rank
         r = min(n, m, state.matrix_approximation_rank): compressed if should_compress(n, m, r,
         state.min_compression_rate), else uncompressed; the compressed ones in by_shape order.
      4. P and Q memories: flat tensors of sum n r and sum m r elements; a matrix's P and Q are
         (n, r) and (m, r) views of consecutive slices. New ones (and random_qs(state, Qs)) when not
         warm_start or the first time for b; else reuse q_memory_dict[b] and orthogonalize_ each Q.
         Every Q is orthogonalized (orthogonalization_epsilon) before use.
      5. P = M Q for each matrix; all-reduce (sum) the uncompressed gradients, concatenated, then
         divide by p and copy them back; all-reduce (sum) the P memory; orthogonalize_ each P;
         Q = M^T P; all-reduce (sum) the Q memory and divide by p; M <- P Q^T (in the bucket).
      6. state.error_dict[b] = copy - buffer (with error feedback); keep P, Q memories in
         state.p_memory_dict[b], q_memory_dict[b] (cleared when not warm_start);
         state.maybe_increase_iter(bucket); return Future.done(buffer).
    Cost: three all-reduces per bucket: the uncompressed elements, sum n r, sum m r elements.
    """
    # BEGIN YOUR CODE  (HW3 task 3.4)
    raise NotImplementedError("HW3 task 3.4: powersgd_hook is not implemented yet (see assignments/hw3/README.md)")
    # END YOUR CODE
