"""Homework 4, task 4.2: column- and row-parallel linear layers (Megatron-LM).

A dense layer y = x W^T + b with W of shape (out, in) is split over the p ranks of a group:

    ColumnParallelLinear  rank r keeps rows [r out/p, (r+1) out/p) of W and of b. Its input is
                          the full x (f: copy_to_region), its output the slice y_r of y's last dim
                          (or the full y with gather_output=True).
    RowParallelLinear     rank r keeps columns [r in/p, (r+1) in/p) of W. Its input is x_r, the slice
                          of x's last dim; the partial products are summed (g: reduce_from_region),
                          then the full bias b (replicated) is added once, after the reduction.

Column then row needs no communication in between: y_r = act(x W_r^T + b_r) is exactly what the
row-parallel layer wants. Both layers are built from a dense nn.Linear, whose weights they
slice, so results can be compared with the dense layer's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.tensor_parallel.comm import copy_to_region, gather_last_dim, reduce_from_region, scatter_last_dim
from minitorch_dist.tensor_parallel.common import shard_slice

__all__ = ["ColumnParallelLinear", "RowParallelLinear"]


class ColumnParallelLinear(nn.Module):
    """y_r = x W_r^T + b_r: this rank's slice of the output features.

    Args:
        dense: the nn.Linear to split (every rank passes the same weights).
        group: the tensor-parallel group.
        gather_output: all-gather the output slices into the full y (forward) / split (backward).
        parts: the output features are `parts` equal blocks split separately (3 for a fused
            q, k, v projection: rank r keeps its slice of q, of k and of v, in that order).
    Shapes: x (..., in) -> (..., out / p), or (..., out) with gather_output.
    Parameters: weight (out / p, in), bias (out / p,) or None (this rank's rows of the dense ones).
    Raises ValueError at construction when out / parts is not divisible by p.
    """

    def __init__(self, dense: nn.Linear, group, gather_output: bool = False, parts: int = 1):
        super().__init__()
        self.group, self.gather_output = group, gather_output
        out = dense.out_features
        if out % parts:
            raise ValueError(f"ColumnParallelLinear: {out} output features are not {parts} equal parts")
        rows = [shard_slice(out // parts, group, "output features", offset=k * (out // parts)) for k in range(parts)]
        # BEGIN SOLUTION  (HW4 task 4.2)
        w = dense.weight.detach()
        self.weight = nn.Parameter(torch.cat([w[s] for s in rows]).clone())
        self.bias = None
        if dense.bias is not None:
            self.bias = nn.Parameter(torch.cat([dense.bias.detach()[s] for s in rows]).clone())
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION  (HW4 task 4.2)
        y = F.linear(copy_to_region(x, self.group), self.weight, self.bias)
        return gather_last_dim(y, self.group) if self.gather_output else y
        # END SOLUTION


class RowParallelLinear(nn.Module):
    """y = g(x_r W_r^T) + b: partial products summed over the group, then the full bias.

    Args:
        dense: the nn.Linear to split.
        group: the tensor-parallel group.
        input_is_parallel: x is already this rank's slice of the last dim (the output of a
            ColumnParallelLinear); False: x is full and is split here (scatter_last_dim).
    Shapes: x (..., in / p) (or (..., in)) -> (..., out), the same on every rank.
    Parameters: weight (out, in / p) (this rank's columns), bias (out,) or None (the full bias).
    Raises ValueError at construction when in is not divisible by p.
    """

    def __init__(self, dense: nn.Linear, group, input_is_parallel: bool = True):
        super().__init__()
        self.group, self.input_is_parallel = group, input_is_parallel
        cols = shard_slice(dense.in_features, group, "input features")
        # BEGIN SOLUTION  (HW4 task 4.2)
        self.weight = nn.Parameter(dense.weight.detach()[:, cols].clone())
        self.bias = None if dense.bias is None else nn.Parameter(dense.bias.detach().clone())
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION  (HW4 task 4.2)
        if not self.input_is_parallel:
            x = scatter_last_dim(x, self.group)
        y = reduce_from_region(F.linear(x, self.weight), self.group)
        return y if self.bias is None else y + self.bias
        # END SOLUTION
