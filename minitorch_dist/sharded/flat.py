"""Flat parameters, provided: flatten tensors into one padded buffer and cut it into equal shards.

    layout = FlatLayout([p.shape for p in params], world_size=3)   # 10 + 4 elements -> padded 15
    flat = layout.flatten([p.detach() for p in params])             # (15,), zeros in the padding
    mine = layout.chunk(flat, rank)                                 # (5,), rank r's elements
    views = layout.views(flat)                                      # one view per tensor, its shape

A ShardedLayout is several FlatLayouts (buckets) side by side: rank r's shard is the
concatenation of its chunk of every bucket, and an all-gather of the shards (rank-major)
comes back apart with `unshard`. With one bucket it is a FlatLayout's chunk.

Padding: a bucket of n elements is padded to ceil(n / p) * p, so its p chunks are equal (the
provided reduce_scatter and all_gather need equal pieces). A rank may hold only padding.
"""

from __future__ import annotations

import math

import torch


def padded_numel(numel: int, world_size: int) -> int:
    """numel rounded up to a multiple of world_size (0 stays 0)."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return math.ceil(numel / world_size) * world_size


class FlatLayout:
    """Where each tensor sits in one flat buffer padded to a multiple of `world_size`.

    Shapes: tensors of `shapes` -> flat (padded,), padded = numel rounded up; chunk = padded / p.
    """

    def __init__(self, shapes, world_size: int):
        self.shapes = [torch.Size(s) for s in shapes]
        self.numels = [math.prod(s) for s in self.shapes]
        self.offsets = [sum(self.numels[:i]) for i in range(len(self.numels))]
        self.numel = sum(self.numels)
        self.world_size = world_size
        self.padded = padded_numel(self.numel, world_size)
        self.chunk_numel = self.padded // world_size

    def flatten(self, tensors, dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
        """One new (padded,) tensor on `device` (default: the first tensor's, else the CPU): the tensors
        (None: zeros) one after another, then zeros."""
        tensors = list(tensors)
        if len(tensors) != len(self.shapes):
            raise ValueError(f"flatten: got {len(tensors)} tensors for a layout of {len(self.shapes)}")
        first = next((t for t in tensors if t is not None), None)
        dtype = dtype or (first.dtype if first is not None else torch.get_default_dtype())
        device = device if device is not None else (first.device if first is not None else None)
        out = torch.zeros(self.padded, dtype=dtype, device=device)
        for t, off, n, shape in zip(tensors, self.offsets, self.numels, self.shapes):
            if t is None:
                continue
            if t.shape != shape:
                raise ValueError(f"flatten: a tensor of shape {tuple(t.shape)} where the layout has {tuple(shape)}")
            out[off:off + n].copy_(t.detach().reshape(-1))
        return out

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Views of `flat` (padded or not) shaped like the layout's tensors."""
        return [flat[off:off + n].view(shape) for off, n, shape in zip(self.offsets, self.numels, self.shapes)]

    def chunk(self, flat: torch.Tensor, rank: int) -> torch.Tensor:
        """Rank `rank`'s chunk of the padded flat buffer (a view)."""
        return flat[rank * self.chunk_numel:(rank + 1) * self.chunk_numel]

    def padding_in_chunk(self, rank: int) -> int:
        """How many elements of rank `rank`'s chunk are padding."""
        lo, hi = rank * self.chunk_numel, (rank + 1) * self.chunk_numel
        return hi - max(lo, min(hi, self.numel))


class ShardedLayout:
    """Buckets of tensors, each a FlatLayout; rank r's shard = its chunk of every bucket, in order.

    buckets: lists of indices into `shapes` (default: one bucket of everything).
    """

    def __init__(self, shapes, world_size: int, buckets: list[list[int]] | None = None):
        self.shapes = [torch.Size(s) for s in shapes]
        self.buckets = buckets if buckets is not None else [list(range(len(self.shapes)))]
        if sorted(i for b in self.buckets for i in b) != list(range(len(self.shapes))):
            raise ValueError("ShardedLayout: the buckets must hold every tensor index exactly once")
        self.world_size = world_size
        self.layouts = [FlatLayout([self.shapes[i] for i in b], world_size) for b in self.buckets]
        starts = [0]
        for lay in self.layouts:
            starts.append(starts[-1] + lay.chunk_numel)
        self.shard_starts = starts[:-1]
        self.shard_numel = starts[-1]
        self.numel = sum(lay.numel for lay in self.layouts)
        self.padded = sum(lay.padded for lay in self.layouts)

    def bucket_shard(self, shard: torch.Tensor, b: int) -> torch.Tensor:
        """The part of a rank's shard that is its chunk of bucket b (a view)."""
        return shard[self.shard_starts[b]:self.shard_starts[b] + self.layouts[b].chunk_numel]

    def shard_of(self, tensors, rank: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Rank `rank`'s shard (new tensor) of the full tensors (in `shapes` order)."""
        tensors = list(tensors)
        parts = [lay.chunk(lay.flatten([tensors[i] for i in b], dtype), rank)
                 for lay, b in zip(self.layouts, self.buckets)]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype or torch.get_default_dtype())

    def unshard(self, gathered: torch.Tensor) -> list[torch.Tensor]:
        """The full tensors (views, in `shapes` order) from the all-gather of every rank's shard."""
        per_rank = gathered.view(self.world_size, self.shard_numel)
        out: list[torch.Tensor | None] = [None] * len(self.shapes)
        for b, (lay, idx) in enumerate(zip(self.layouts, self.buckets)):
            start = self.shard_starts[b]
            flat = per_rank[:, start:start + lay.chunk_numel].reshape(-1)      # (padded_b,)
            for i, v in zip(idx, lay.views(flat)):
                out[i] = v
        return out


def buckets_by_size(numels: list[int], bucket_numel: int) -> list[list[int]]:
    """Indices in reverse order (the order backward produces gradients), cut into buckets of about
    `bucket_numel` elements (a bucket closes once it holds at least that many)."""
    buckets, current, size = [], [], 0
    for i in reversed(range(len(numels))):
        current.append(i)
        size += numels[i]
        if size >= bucket_numel:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets
