"""Homework 3, task 3.2: sparsification, k of the n elements.

    TopK(k)           the k elements of largest magnitude, as (values, int32 indices); ties go to the
                      lower index. Every rank picks its own indices, so the all-reduce all-gathers
                      values and indices and adds every rank's values at its indices (scatter-add).
    RandomK(k, seed)  k indices drawn from a generator seeded by (seed, step): every rank draws the
                      same ones, and they change from one step (compress call) to the next. Since the
                      indices agree, only the k values are all-reduced (group.all_reduce).

Cost of one all-reduce of n elements of s bytes, p ranks on a ring: TopK all-gathers k (s + 4) bytes
per rank, so each rank sends (p-1) k (s + 4); RandomK all-reduces k s bytes, 2 (p-1)/p k s per rank;
a dense all-reduce 2 (p-1)/p n s. The result of TopK has up to p k non-zeros, RandomK's exactly k.

Allocate on the data's device, which is group.device (a GPU on backend nccl): zeros(..., device=
values.device). RandomK draws its indices with a CPU torch.Generator (the same numbers on any device)
and moves them to x's device.
"""

from __future__ import annotations

import torch

from minitorch_dist.compression.common import Compressor, check_op, check_positive

__all__ = ["TopK", "RandomK"]


def _check_k(k: int, numel: int) -> None:
    if k > numel:
        raise ValueError(f"k={k} is larger than the tensor's {numel} elements")


class TopK(Compressor):
    """The k largest magnitudes of x, with their positions.

    Shapes: x (n,) -> payload (values (k,) of x's dtype, indices int32 (k,)); k <= n.
    Ties in |x| go to the lower index (a stable sort of |x|, descending). Decompression scatters the
    values into zeros.
    Cost: a payload of k (s + 4) bytes (values of s bytes, int32 indices); sorting n elements.
    Raises ValueError when k < 0 (at construction) or k > n (in compress).
    """

    def __init__(self, k: int):
        self.k = check_positive(k, "k", allow_zero=True)

    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Steps: a stable descending sort of |x|; its first k positions; x at those positions."""
        # BEGIN SOLUTION  (HW3 task 3.2)
        x = x.reshape(-1)
        _check_k(self.k, x.numel())
        order = torch.sort(x.abs(), descending=True, stable=True).indices[:self.k]    # (k,)
        return x[order].clone(), order.to(torch.int32)
        # END SOLUTION

    def decompress(self, payload, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """Shapes: (values (k,), indices (k,)) -> (n,): the values at their indices, zeros elsewhere."""
        # BEGIN SOLUTION  (HW3 task 3.2)
        values, indices = payload
        return torch.zeros(numel, dtype=dtype, device=values.device).index_put_((indices.long(),), values.to(dtype))
        # END SOLUTION

    def payload_bytes(self, numel: int, dtype: torch.dtype = torch.float32) -> int:
        return self.k * (torch.finfo(dtype).bits // 8 + 4)

    def aggregate(self, payload, numel: int, dtype: torch.dtype, group, op: str = "avg") -> torch.Tensor:
        """Every rank's top-k values added at their indices.

        Shapes: values (k,), indices (k,) on every rank -> (numel,), the same on every rank.
        Steps: all-gather the values and the indices ((k,) -> (p k,)); index_add the values into
        zeros (indices of different ranks may coincide: add, never overwrite), one rank's k at a
        time in rank order (on a GPU, one index_add_ with repeated indices adds them in any order,
        and every rank must get the same bits); / p for "avg".
        Cost: all-gather inputs k (s + 4) bytes; (p-1) k (s + 4) sent per rank on a ring.
        """
        # BEGIN SOLUTION  (HW3 task 3.2)
        check_op(op)
        values, indices = payload
        all_values = group.all_gather(values)                                          # (p k,)
        all_indices = group.all_gather(indices)                                        # (p k,)
        total = torch.zeros(numel, dtype=dtype, device=all_values.device)
        for values, indices in zip(all_values.view(group.size, -1), all_indices.view(group.size, -1)):
            total.index_add_(0, indices.long(), values.to(dtype))                      # distinct within a rank
        return total / group.size if op == "avg" else total
        # END SOLUTION


class RandomK(Compressor):
    """k positions drawn at random, the same on every rank: only the values travel.

    Shapes: x (n,) -> payload (values (k,) of x's dtype, indices int32 (k,)); k <= n. The indices of
    a compress call are k distinct positions drawn by a torch.Generator seeded from (seed, step),
    where step counts this object's compress calls (0, 1, 2, ...); two compressors with the same
    seed called the same number of times draw the same indices, on any rank. The indices are part
    of the payload for decompress, but aggregate sends only the values.
    Cost: k s bytes on the wire (the values); drawing the indices costs a permutation of n.
    Raises ValueError when k < 0 (at construction) or k > n (in compress).
    """

    def __init__(self, k: int, seed: int = 0):
        self.k = check_positive(k, "k", allow_zero=True)
        self.seed = int(seed)
        self.step = 0

    def indices(self, numel: int, step: int) -> torch.Tensor:
        """The k distinct positions (int64, sorted) drawn for compress call number `step`."""
        # BEGIN SOLUTION  (HW3 task 3.2)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        return torch.randperm(numel, generator=gen)[:self.k].sort().values
        # END SOLUTION

    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Steps: indices(n, step), then step += 1; x at those indices."""
        # BEGIN SOLUTION  (HW3 task 3.2)
        x = x.reshape(-1)
        _check_k(self.k, x.numel())
        idx = self.indices(x.numel(), self.step).to(x.device)                     # drawn on the CPU
        self.step += 1
        return x[idx].clone(), idx.to(torch.int32)
        # END SOLUTION

    def decompress(self, payload, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """Shapes: (values (k,), indices (k,)) -> (n,): the values at their indices, zeros elsewhere."""
        # BEGIN SOLUTION  (HW3 task 3.2)
        values, indices = payload
        return torch.zeros(numel, dtype=dtype, device=values.device).index_put_((indices.long(),), values.to(dtype))
        # END SOLUTION

    def payload_bytes(self, numel: int, dtype: torch.dtype = torch.float32) -> int:
        return self.k * (torch.finfo(dtype).bits // 8)     # the values only: the indices never travel

    def aggregate(self, payload, numel: int, dtype: torch.dtype, group, op: str = "avg") -> torch.Tensor:
        """The ranks' values at the shared indices, all-reduced.

        Shapes: values (k,), indices (k,), equal on every rank -> (numel,).
        Steps: all-reduce a copy of the values (op); scatter the result into zeros at the indices.
        Cost: one all-reduce of k s bytes: 2 (p-1)/p k s per rank on a ring.
        """
        # BEGIN SOLUTION  (HW3 task 3.2)
        check_op(op)
        values, indices = payload
        summed = group.all_reduce(values.to(dtype).clone(), op)                        # (k,)
        return self.decompress((summed, indices), numel, dtype)
        # END SOLUTION
