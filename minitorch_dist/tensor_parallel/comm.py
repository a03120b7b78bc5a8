"""Homework 4, task 4.1: the communication ops of tensor parallelism, as autograd Functions.

Megatron-LM splits a layer's weights over the ranks of a tensor-parallel group. Each op below
moves activations in the forward pass and gradients in the backward pass; the two passes
are conjugate (an all-reduce in one is an identity in the other):

    copy_to_region      f   forward: identity          | backward: all-reduce (sum)
    reduce_from_region  g   forward: all-reduce (sum)  | backward: identity
    scatter_last_dim        forward: keep my slice     | backward: all-gather along the last dim
    gather_last_dim         forward: all-gather (last) | backward: keep my slice

The group is always passed explicitly. With a group of size 1 every op returns its input
unchanged and records nothing in autograd (the size-1 bypass). The last dimension must be
divisible by the group size for scatter_last_dim.
"""

from __future__ import annotations

import torch

from minitorch_dist.tensor_parallel.common import shard_slice

__all__ = ["copy_to_region", "reduce_from_region", "scatter_last_dim", "gather_last_dim",
           "split_last_dim", "all_gather_last_dim"]


def split_last_dim(x: torch.Tensor, group) -> torch.Tensor:
    """This rank's slice of x along the last dim (contiguous). Shapes: (..., n) -> (..., n / p)."""
    cols = shard_slice(x.shape[-1], group, "the last dimension")
    # BEGIN YOUR CODE  (HW4 task 4.1)
    raise NotImplementedError("HW4 task 4.1: split_last_dim is not implemented yet (see assignments/hw4/README.md)")
    # END YOUR CODE


def all_gather_last_dim(x: torch.Tensor, group) -> torch.Tensor:
    """Concatenate every rank's x along the last dim, in rank order. Shapes: (..., m) -> (..., p m).

    The provided group.all_gather concatenates along dim 0: move the last dim first, gather,
    and move it back.
    """
    # BEGIN YOUR CODE  (HW4 task 4.1)
    raise NotImplementedError("HW4 task 4.1: all_gather_last_dim is not implemented yet (see assignments/hw4/README.md)")
    # END YOUR CODE


class _CopyToRegion(torch.autograd.Function):
    """forward: identity | backward: all-reduce (sum) of the gradient."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    @staticmethod
    def backward(ctx, grad):
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: backward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


class _ReduceFromRegion(torch.autograd.Function):
    """forward: all-reduce (sum) | backward: identity."""

    @staticmethod
    def forward(ctx, x, group):
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    @staticmethod
    def backward(ctx, grad):
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: backward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


class _ScatterLastDim(torch.autograd.Function):
    """forward: keep this rank's slice of the last dim | backward: all-gather along the last dim."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    @staticmethod
    def backward(ctx, grad):
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: backward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


class _GatherLastDim(torch.autograd.Function):
    """forward: all-gather along the last dim | backward: keep this rank's slice."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    @staticmethod
    def backward(ctx, grad):
        # BEGIN YOUR CODE  (HW4 task 4.1)
        raise NotImplementedError("HW4 task 4.1: backward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


def copy_to_region(x: torch.Tensor, group) -> torch.Tensor:
    """f: forward identity, backward all-reduce. Size-1 groups: x itself."""
    return x if group.size == 1 else _CopyToRegion.apply(x, group)


def reduce_from_region(x: torch.Tensor, group) -> torch.Tensor:
    """g: forward all-reduce, backward identity. Size-1 groups: x itself."""
    return x if group.size == 1 else _ReduceFromRegion.apply(x, group)


def scatter_last_dim(x: torch.Tensor, group) -> torch.Tensor:
    """forward split (my slice of the last dim), backward all-gather. Size-1 groups: x itself."""
    return x if group.size == 1 else _ScatterLastDim.apply(x, group)


def gather_last_dim(x: torch.Tensor, group) -> torch.Tensor:
    """forward all-gather along the last dim, backward split. Size-1 groups: x itself."""
    return x if group.size == 1 else _GatherLastDim.apply(x, group)
