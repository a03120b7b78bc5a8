"""Which samples each rank sees: shards of a data set, global batches and a rank's part of one.

    shard_indices(10, rank=1, world_size=3)        -> tensor([3, 4, 5])       (index 9 dropped)
    shard_indices(10, 1, 3, drop_last=False)       -> tensor([4, 5, 6])       (sizes 4, 3, 3)
    batches = global_batches(512, 32, seed=0, epoch=0)   # 16 LongTensors of 32 indices
    local_part(batches[0], rank=2, world_size=4)   -> batches[0][16:24]

Everything is a pure function of its arguments (no communication, no global RNG): every rank
computes the same permutation and takes its own slice.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .seeding import generator


def _check_rank(rank: int, world_size: int) -> None:
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1; got world_size={world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside [0, {world_size}) for world_size={world_size}; "
                         f"pass group.rank and group.size")


def permutation(n: int, seed: int, epoch: int = 0) -> Tensor:
    """The permutation of range(n) for (seed, epoch), the same in every process. Shapes: (n,) int64."""
    if n < 0:
        raise ValueError(f"the data set size n must be >= 0; got n={n}")
    return torch.randperm(n, generator=generator(seed, epoch))


def shard_indices(n: int, rank: int, world_size: int, *, seed: int | None = None, epoch: int = 0,
                  drop_last: bool = True) -> Tensor:
    """The indices of rank `rank`'s shard of a data set of n samples: disjoint shards that cover it.

    Shapes: -> (n // world_size,) int64 with drop_last; else (n // world_size + 1,) for the
            first n % world_size ranks and (n // world_size,) for the others.
    Steps:  1. order = arange(n) if seed is None, else the permutation of (seed, epoch);
            2. drop_last: the first world_size * (n // world_size) entries of order are cut
            into equal contiguous parts (the last n % world_size < world_size are dropped);
            otherwise all of order is cut into contiguous parts whose sizes differ by at most
            one (torch.tensor_split), so every index is in exactly one shard;
            3. rank r takes part r.

    Args:
        n: data set size (>= 0).
        rank: this rank, in [0, world_size).
        world_size: number of ranks (>= 1).
        seed: None keeps the data set order; an int shuffles it (change `epoch` to reshuffle).
        epoch: epoch number, mixed with `seed`.
        drop_last: drop the tail that does not split evenly (every rank the same size).

    Raises:
        ValueError: world_size < 1, rank outside [0, world_size), or n < 0.
    """
    _check_rank(rank, world_size)
    if n < 0:
        raise ValueError(f"the data set size n must be >= 0; got n={n}")
    order = torch.arange(n) if seed is None else permutation(n, seed, epoch)   # (n,)
    if drop_last:
        per_rank = n // world_size
        return order[rank * per_rank:(rank + 1) * per_rank].clone()
    return torch.tensor_split(order, world_size)[rank].clone()


def global_batches(n: int, batch_size: int, *, seed: int = 0, epoch: int = 0) -> list[Tensor]:
    """The global batches of one epoch: the permutation of (seed, epoch) cut into batch_size pieces.

    Shapes: -> n // batch_size LongTensors of shape (batch_size,); the last partial batch
            (n % batch_size samples) is dropped. Indices are disjoint across batches.
    Every rank calls this with the same arguments and gets the same list; each then takes
    local_part(batch, rank, world_size), so a data-parallel step sees exactly the samples of
    the single-process step on the whole batch.

    Raises:
        ValueError: n < 0 or batch_size < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got batch_size={batch_size}")
    order = permutation(n, seed, epoch)                                       # (n,)
    return [order[i * batch_size:(i + 1) * batch_size].clone() for i in range(n // batch_size)]


def local_part(batch_indices: Tensor, rank: int, world_size: int) -> Tensor:
    """Rank `rank`'s contiguous part of a global batch; the parts in rank order concatenate to it.

    Shapes: batch_indices (B, ...) (a LongTensor of sample indices, or any batch tensor such as
            the x of char_batches) -> (B // world_size, ...) = batch_indices[r*b:(r+1)*b],
            b = B // world_size.

    Raises:
        ValueError: world_size < 1, rank outside [0, world_size), or B not divisible by
            world_size (the message suggests the nearest batch sizes that are).
    """
    _check_rank(rank, world_size)
    size = batch_indices.shape[0]
    if size % world_size != 0:
        below, above = (size // world_size) * world_size, (size // world_size + 1) * world_size
        hint = f"{below} or {above}" if below > 0 else f"{above}"
        raise ValueError(f"a global batch of {size} samples does not split evenly over "
                         f"world_size={world_size} ranks; use a batch size divisible by {world_size} "
                         f"(e.g. {hint})")
    part = size // world_size
    return batch_indices[rank * part:(rank + 1) * part]
