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
    # BEGIN SOLUTION  (HW3 task 3.4)
    for i in range(matrix.shape[1]):
        col = matrix[:, i:i + 1]
        norm = torch.linalg.vector_norm(col)
        if epsilon:
            col /= norm + epsilon
        elif norm > 0:
            col /= norm
        else:
            col.zero_()
        rest = matrix[:, i + 1:]
        rest -= (col * rest).sum(dim=0, keepdim=True) * col
    return matrix
    # END SOLUTION


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
    # BEGIN SOLUTION  (HW3 task 3.4)
    group = state.group
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return allreduce_hook(group, bucket)
    buffer, b, p = bucket.buffer(), bucket.index(), group.size
    if state.use_error_feedback:
        if b in state.error_dict:
            buffer.add_(state.error_dict[b])
        else:
            state.error_dict[b] = torch.zeros_like(buffer)
        wanted = buffer.clone()
    rank, compress, plain = state.matrix_approximation_rank, [], []
    for g in bucket.gradients():
        matrix = g.view(g.shape[0], -1) if g.dim() else g.view(1, 1)
        n, m = matrix.shape
        worth = should_compress(n, m, min(n, m, rank), state.min_compression_rate)
        (compress if worth else plain).append(matrix if worth else g)
    matrices = by_shape(compress)
    sizes = [(n, m, min(n, m, rank)) for n, m in (mat.shape for mat in matrices)]
    fresh = not state.warm_start or b not in state.p_memory_dict
    if fresh:
        state.p_memory_dict[b] = buffer.new_empty(sum(n * r for n, _, r in sizes))
        state.q_memory_dict[b] = buffer.new_empty(sum(m * r for _, m, r in sizes))
    ps, qs, i, j = [], [], 0, 0
    for n, m, r in sizes:
        ps.append(state.p_memory_dict[b][i:i + n * r].view(n, r))
        qs.append(state.q_memory_dict[b][j:j + m * r].view(m, r))
        i, j = i + n * r, j + m * r
    if fresh:
        random_qs(state, qs)
    for q in qs:
        orthogonalize_(q, state.orthogonalization_epsilon)
    for mat, q, pm in zip(matrices, qs, ps):
        torch.matmul(mat, q, out=pm)
    flat_plain = torch.cat([g.reshape(-1) for g in plain]) if plain else buffer.new_zeros(0)
    group.all_reduce(flat_plain).div_(p)
    offset = 0
    for g in plain:
        g.copy_(flat_plain[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
    group.all_reduce(state.p_memory_dict[b])
    for pm in ps:
        orthogonalize_(pm, state.orthogonalization_epsilon)
    for mat, q, pm in zip(matrices, qs, ps):
        torch.matmul(mat.t(), pm, out=q)
    group.all_reduce(state.q_memory_dict[b]).div_(p)
    for mat, q, pm in zip(matrices, qs, ps):
        torch.matmul(pm, q.t(), out=mat)
    if state.use_error_feedback:
        state.error_dict[b] = wanted - buffer
    if not state.warm_start:
        state.p_memory_dict.clear()
        state.q_memory_dict.clear()
    state.maybe_increase_iter(bucket)
    return Future.done(buffer)
    # END SOLUTION
