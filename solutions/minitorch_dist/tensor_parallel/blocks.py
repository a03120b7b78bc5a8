"""Homework 4, task 4.3: a tensor-parallel transformer block (MLP and causal self-attention).

    ParallelMLP            fc column-parallel (no gather) -> GELU -> fc_proj row-parallel
    ParallelSelfAttention  fused q, k, v column-parallel by heads (rank r computes heads
                           [r nh/p, (r+1) nh/p) entirely locally) -> proj row-parallel
    ParallelBlock          x + attn(ln1(x)), then + mlp(ln2(x)); layer norms replicated

Communication: one all-reduce forward (g in the row-parallel layer) and one backward (f in the
column-parallel layer) per MLP and per attention; nothing else. Each module is built from the
matching dense module of minitorch_dist.models.char_transformer and slices its weights.

    Cost per block and step (activations of b s h elements of e bytes): 4 all-reduces of b s h e
    bytes; parameters per rank: (12 h^2) / p plus the replicated biases of the row layers and norms.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from minitorch_dist.models.char_transformer import Block, CausalSelfAttention
from minitorch_dist.tensor_parallel.common import causal_attention, check_divisible
from minitorch_dist.tensor_parallel.linear import ColumnParallelLinear, RowParallelLinear

__all__ = ["ParallelMLP", "ParallelSelfAttention", "ParallelBlock"]


class ParallelMLP(nn.Module):
    """fc_proj(gelu(fc(x))) with fc column-parallel and fc_proj row-parallel. Shapes: (..., h) -> same.

    Attributes (tests read them): fc (ColumnParallelLinear), act (nn.GELU), fc_proj (RowParallelLinear).
    """

    def __init__(self, fc: nn.Linear, fc_proj: nn.Linear, group):
        super().__init__()
        # BEGIN SOLUTION  (HW4 task 4.3)
        self.fc = ColumnParallelLinear(fc, group)
        self.act = nn.GELU()
        self.fc_proj = RowParallelLinear(fc_proj, group)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION  (HW4 task 4.3)
        return self.fc_proj(self.act(self.fc(x)))
        # END SOLUTION


class ParallelSelfAttention(nn.Module):
    """Causal self-attention with the heads split over the group.

    Shapes: x (B, T, C) -> (B, T, C), the same on every rank; inside, rank r holds q, k, v of
    its nh/p heads: (B, nh/p, T, hs). Raises ValueError when n_heads is not divisible by p.
    The attention arithmetic itself is provided: common.causal_attention(qkv, heads, head_size).
    Attributes (tests read them): qkv (ColumnParallelLinear with parts=3), proj (RowParallelLinear).
    """

    def __init__(self, dense: CausalSelfAttention, group):
        super().__init__()
        self.group = group
        self.local_heads = check_divisible(dense.n_heads, group, "the number of attention heads")
        self.head_size = dense.qkv.in_features // dense.n_heads
        # BEGIN SOLUTION  (HW4 task 4.3)
        self.qkv = ColumnParallelLinear(dense.qkv, group, parts=3)
        self.proj = RowParallelLinear(dense.proj, group)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION  (HW4 task 4.3)
        y = causal_attention(self.qkv(x), self.local_heads, self.head_size)   # (B, T, C / p)
        return self.proj(y)                                                    # (B, T, C)
        # END SOLUTION


class ParallelBlock(nn.Module):
    """The tensor-parallel version of a dense pre-LayerNorm Block (layer norms copied, replicated).

    Attributes (tests read them): ln1, attn (ParallelSelfAttention), ln2, mlp (ParallelMLP).
    """

    def __init__(self, dense: Block, group):
        super().__init__()
        self.ln1, self.ln2 = copy.deepcopy(dense.ln1), copy.deepcopy(dense.ln2)
        # BEGIN SOLUTION  (HW4 task 4.3)
        self.attn = ParallelSelfAttention(dense.attn, group)
        self.mlp = ParallelMLP(dense.fc, dense.fc_proj, group)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION  (HW4 task 4.3)
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))
        # END SOLUTION
