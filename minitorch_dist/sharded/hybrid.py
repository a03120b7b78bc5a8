"""Homework 6, task 6.6 (bonus): hybrid sharding (HSDP), FSDP inside a node, data parallel across.

    hsdp = HybridShardedModel(model, group, shard_size=2)      # 4 ranks: 2 nodes of 2
    opt = torch.optim.AdamW(hsdp.parameters(), lr=1e-3)        # the shards, 1/shard_size each
    loss = F.cross_entropy(hsdp(idx).flatten(0, 1), targets.flatten()); loss.backward(); opt.step()

The N ranks of `group` form N/s shard groups of s consecutive ranks (one node each: ranks
[0, s), [s, 2s), ...) and s replica groups, the ranks at the same place in every shard group
(rank w is in replica group w % s: ranks w % s, w % s + s, ...). Inside a shard group the model is
FSDP (task 6.3: units all-gathered before forward and backward, freed after); the N/s shard
groups hold the same shards (replicas), so after the reduce-scatter inside the shard group each
rank all-reduces its gradient shard, the mean over its node, with its replica group (the mean
over nodes): the mean over all N ranks.

Per unit of padded n elements (padded to a multiple of s) and step, each rank sends: two
all-gathers and a reduce-scatter inside its node, 3 (s-1)/s n as FSDP on s ranks, and a ring
all-reduce of its shard (n/s elements) across the N/s replicas, 2 (N/s-1)/(N/s) n/s. Memory:
parameters, gradients and optimizer state of 1/s of the model per rank (not 1/N).
s = N is FSDP; s = 1 is DDP (the all-reduce of every gradient).
"""

from __future__ import annotations

import torch

from minitorch_dist.sharded.flat_unit import FlatParamUnit
from minitorch_dist.sharded.fsdp import FullyShardedModel

__all__ = ["HybridParamUnit", "HybridShardedModel", "hybrid_groups", "check_shard_size"]


def check_shard_size(group, shard_size) -> None:
    """A clear error unless shard_size is a whole number of ranks that divides the group's size."""
    if isinstance(shard_size, bool) or not isinstance(shard_size, int):
        raise TypeError(f"shard_size must be an int (ranks per shard group), got {shard_size!r}")
    if shard_size < 1 or group.size % shard_size:
        ok = [s for s in range(1, group.size + 1) if group.size % s == 0]
        raise ValueError(f"shard_size={shard_size} must divide the number of ranks {group.size} (the ranks "
                         f"form {group.size}/shard_size shard groups of equal size); use one of {ok}")


def hybrid_groups(group, shard_size: int):
    """(shard_group, replica_group) of this rank: its block of shard_size consecutive ranks, and the
    ranks at its place in every block. Every rank of `group` calls it (it makes sub-groups)."""
    check_shard_size(group, shard_size)
    # BEGIN YOUR CODE  (HW6 task 6.6)
    raise NotImplementedError("HW6 task 6.6: hybrid_groups is not implemented yet (see assignments/hw6/README.md)")
    # END YOUR CODE


class HybridParamUnit(FlatParamUnit):
    """An FSDP unit sharded over `group` (the shard group) whose gradient shards are averaged over
    `replica_group` too. Attributes: those of FlatParamUnit, and replica_group."""

    def __init__(self, spec, group, replica_group, compute_dtype: torch.dtype | None = None):
        self.replica_group = replica_group
        super().__init__(spec, group, compute_dtype)

    def reduce_gradient(self) -> None:
        """full.grad -> this rank's shard of the mean over all ranks (reduce-scatter in the shard
        group, then all-reduce across the replicas), added to shard.grad; then free."""
        # BEGIN YOUR CODE  (HW6 task 6.6)
        raise NotImplementedError("HW6 task 6.6: reduce_gradient is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE


class HybridShardedModel(FullyShardedModel):
    """HSDP: FullyShardedModel over this rank's shard group, gradients averaged across replicas.

    Attributes: those of FullyShardedModel (`group` is the shard group), world (the whole group),
    shard_size, shard_group, replica_group. Construction (your part): every rank takes the world's
    rank 0's parameters and buffers (broadcast over `group`), so ranks that started apart train one
    model; then self.shard_group and self.replica_group (hybrid_groups). The provided rest builds the
    FullyShardedModel over the shard group, with a HybridParamUnit per unit (new_unit).
    """

    def __init__(self, model, group, shard_size: int, prefetch: bool = False, checkpoint: bool = False,
                 compute_dtype: torch.dtype | None = None, units=None, replicate=()):
        check_shard_size(group, shard_size)
        self.world, self.shard_size = group, shard_size
        # BEGIN YOUR CODE  (HW6 task 6.6)
        raise NotImplementedError("HW6 task 6.6: __init__ is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE
        super().__init__(model, self.shard_group, prefetch=prefetch, checkpoint=checkpoint,
                         compute_dtype=compute_dtype, units=units, replicate=replicate)

    def new_unit(self, spec, compute_dtype):
        """A unit sharded over the shard group whose gradient is averaged over the replica group."""
        return HybridParamUnit(spec, self.shard_group, self.replica_group, compute_dtype)
