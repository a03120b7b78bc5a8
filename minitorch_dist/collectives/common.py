"""Provided helpers for homework 1: reduction ops, chunk bounds and argument checks.

Nothing here communicates; the algorithms in ping_pong.py, tree.py, ring.py and
all_reduce.py call these so that every algorithm splits and combines the same way.
"""

from __future__ import annotations

import torch

OPS = ("sum", "max", "min", "prod")


def check_op(op: str, where: str) -> None:
    """Raise ValueError unless `op` is a reduction this homework supports."""
    if op not in OPS:
        raise ValueError(f"{where}: unknown op {op!r}; use one of {OPS}")


def combine_(acc: torch.Tensor, other: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """acc <- acc (op) other, elementwise and in place; returns acc.

    Shapes: acc and other the same shape and dtype.
    Every op here is commutative, so a (op) b and b (op) a give the same bits:
    two ranks that combine each other's buffers end with identical results.
    """
    if op == "sum":
        if acc.dtype == torch.bool:
            return torch.logical_or(acc, other, out=acc)
        return acc.add_(other)
    if op == "max":
        return torch.maximum(acc, other, out=acc)
    if op == "min":
        return torch.minimum(acc, other, out=acc)
    if op == "prod":
        if acc.dtype == torch.bool:
            return torch.logical_and(acc, other, out=acc)
        return acc.mul_(other)
    raise ValueError(f"combine_: unknown op {op!r}; use one of {OPS}")


def chunk_bounds(n: int, p: int) -> list[tuple[int, int]]:
    """Split n elements into p contiguous chunks whose sizes differ by at most one.

    The first n % p chunks get one extra element; when n < p the last chunks are empty.
    Returns [(start, stop)] for chunks 0..p-1.

        chunk_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    """
    if p < 1 or n < 0:
        raise ValueError(f"chunk_bounds: need n >= 0 and p >= 1, got n={n}, p={p}")
    base, extra = divmod(n, p)
    bounds, start = [], 0
    for i in range(p):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def flat(x: torch.Tensor, where: str) -> torch.Tensor:
    """A 1-D view of `x` sharing its memory, so that in-place algorithms update `x` itself.

    Raises TypeError for a non-tensor and ValueError for a non-contiguous tensor (whose
    elements cannot be viewed as one flat buffer): call `.contiguous()` first.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{where}: expected a torch.Tensor, got {type(x).__name__}")
    if not x.is_contiguous():
        raise ValueError(f"{where}: the tensor is not contiguous (shape {tuple(x.shape)}, stride "
                         f"{x.stride()}); pass x.contiguous() and use the returned tensor")
    return x.view(-1)


def check_root(root: int, group, where: str) -> None:
    """Raise ValueError unless `root` is a rank of `group`."""
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < group.size:
        raise ValueError(f"{where}: root={root!r} is not a rank of a group of size {group.size} "
                         f"(use 0..{group.size - 1})")
