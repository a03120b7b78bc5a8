"""Homework 4, task 4.5 (bonus): sequence parallelism for the layer norms (Korthikanti et al. 2022).

In a ParallelBlock every rank computes the layer norms (and dropout) on the full (B, T, C)
activations: the same work p times, and p copies of those activations in memory. Sequence
parallelism keeps the activations between the tensor-parallel regions split along the
sequence, rank r holding tokens [r T/p, (r+1) T/p), and swaps each region's all-reduce for
a reduce-scatter and an all-gather (the same bytes: an all-reduce is exactly those two):

    gather_sequence           forward: all-gather along T  | backward: reduce-scatter along T
    reduce_scatter_sequence   forward: reduce-scatter on T | backward: all-gather along T

    block(x_r):  h = gather_sequence(ln1(x_r));  x_r += reduce_scatter_sequence(attn_core(h)) + b_proj
                 h = gather_sequence(ln2(x_r));  x_r += reduce_scatter_sequence(mlp_core(h)) + b_fc_proj

The layer norms' gradients are then partial (each rank saw T/p tokens): sum them over the group
(sync_layer_norm_grads) before an optimizer step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.models.char_transformer import Block
from minitorch_dist.tensor_parallel.blocks import ParallelBlock
from minitorch_dist.tensor_parallel.common import causal_attention

__all__ = ["gather_sequence", "reduce_scatter_sequence", "SequenceParallelBlock"]


def _all_gather_seq(x: torch.Tensor, group) -> torch.Tensor:
    """(B, T/p, C) on every rank -> (B, T, C), rank order along T."""
    return group.all_gather(x.transpose(0, 1).contiguous()).transpose(0, 1).contiguous()


def _reduce_scatter_seq(x: torch.Tensor, group) -> torch.Tensor:
    """(B, T, C) on every rank -> (B, T/p, C): the sum over ranks of this rank's tokens."""
    return group.reduce_scatter(x.transpose(0, 1).contiguous()).transpose(0, 1).contiguous()


class _GatherSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        # BEGIN YOUR CODE  (HW4 task 4.5)
        raise NotImplementedError("HW4 task 4.5: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    @staticmethod
    def backward(ctx, grad):
        # BEGIN YOUR CODE  (HW4 task 4.5)
        raise NotImplementedError("HW4 task 4.5: backward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


class _ReduceScatterSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        # BEGIN YOUR CODE  (HW4 task 4.5)
        raise NotImplementedError("HW4 task 4.5: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    @staticmethod
    def backward(ctx, grad):
        # BEGIN YOUR CODE  (HW4 task 4.5)
        raise NotImplementedError("HW4 task 4.5: backward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


def gather_sequence(x: torch.Tensor, group) -> torch.Tensor:
    """forward all-gather along dim 1 (T), backward reduce-scatter. Size-1 groups: x itself."""
    return x if group.size == 1 else _GatherSequence.apply(x, group)


def reduce_scatter_sequence(x: torch.Tensor, group) -> torch.Tensor:
    """forward reduce-scatter along dim 1 (T), backward all-gather. Size-1 groups: x itself."""
    return x if group.size == 1 else _ReduceScatterSequence.apply(x, group)


class SequenceParallelBlock(nn.Module):
    """A ParallelBlock whose input and output are this rank's slice of the sequence.

    Shapes: x (B, T/p, C) -> (B, T/p, C). Uses the sharded weights of a ParallelBlock built from
    `dense` (self.tp) but not its forward: the f/g all-reduces become the ops above.
    """

    def __init__(self, dense: Block, group):
        super().__init__()
        self.group = group
        self.tp = ParallelBlock(dense, group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN YOUR CODE  (HW4 task 4.5)
        raise NotImplementedError("HW4 task 4.5: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    def sync_layer_norm_grads(self) -> None:
        """Sum the layer norms' gradients over the group (each rank saw T/p of the tokens)."""
        # BEGIN YOUR CODE  (HW4 task 4.5)
        raise NotImplementedError("HW4 task 4.5: sync_layer_norm_grads is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE
