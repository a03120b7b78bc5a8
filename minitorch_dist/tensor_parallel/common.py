"""Provided pieces of homework 4 (tensor parallelism): which slice of a dimension a rank owns."""

from __future__ import annotations

__all__ = ["shard_slice", "check_divisible", "causal_attention"]


def check_divisible(n: int, group, what: str) -> int:
    """n // p, or a ValueError at construction that names what does not divide and how to fix it."""
    p = group.size
    if n % p:
        raise ValueError(f"tensor parallel on rank {group.rank}: {what} ({n}) is not divisible by the "
                         f"tensor-parallel size {p}; choose a size that divides {n} "
                         f"(e.g. {[d for d in range(1, min(n, 8) + 1) if n % d == 0]}) or change the model")
    return n // p


def shard_slice(n: int, group, what: str, offset: int = 0) -> slice:
    """The slice [offset + r n/p, offset + (r+1) n/p) that rank r owns of a dimension of size n."""
    k = check_divisible(n, group, what)
    return slice(offset + group.rank * k, offset + (group.rank + 1) * k)


def causal_attention(qkv, n_heads: int, head_size: int):
    """Causal multi-head attention on a fused q, k, v projection (the math, no communication).

    Shapes: qkv (B, T, 3 nh hs) holding [q | k | v] -> y (B, T, nh hs), heads concatenated.
    The same arithmetic as minitorch_dist.models.char_transformer.CausalSelfAttention.
    """
    import math

    import torch
    B, T, _ = qkv.shape
    q, k, v = qkv.split(n_heads * head_size, dim=2)
    q, k, v = (t.view(B, T, n_heads, head_size).transpose(1, 2) for t in (q, k, v))   # (B, nh, T, hs)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_size))                    # (B, nh, T, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=qkv.device).tril()
    att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).contiguous().view(B, T, n_heads * head_size)
