"""Homework 1, task 1.2: broadcast and reduce along a binomial tree.

A binomial tree rooted at `root` reaches p ranks in ceil(log2 p) rounds: in each round
every rank that already holds the data passes it to one more rank, so the number of
holders doubles. Number ranks relative to the root, vr = (rank - root) mod p; rank vr's
parent is vr with its lowest set bit cleared, and its children are vr + 2^k for every
2^k below that bit. Reduce runs the same tree upwards, combining as it goes.
"""

from __future__ import annotations

import torch

from .common import check_op, check_root, combine_, flat


def broadcast(x: torch.Tensor, group, root: int = 0) -> torch.Tensor:
    """Copy `x` from `root` to every rank of `group`, in place, along a binomial tree.

    Shapes: x the same shape and dtype on every rank (any shape, any size including 0).
            On `root` x is read; on every other rank it is overwritten. Returns x.
    Steps:  with vr = (rank - root) mod p:
            1. every rank but the root receives x from its parent, vr - (lowest set bit of vr);
            2. it then sends x to its children vr + mask, for each power of two mask below
               that bit (largest first), skipping children >= p.
    Cost:   ceil(log2 p) * (alpha + n*s*beta); the root sends ceil(log2 p) messages.
    """
    # BEGIN YOUR CODE  (HW1 task 1.2)
    raise NotImplementedError("HW1 task 1.2: broadcast is not implemented yet (see assignments/hw1/README.md)")
    # END YOUR CODE


def reduce(x: torch.Tensor, group, root: int = 0, op: str = "sum") -> torch.Tensor:
    """Combine `x` over all ranks of `group` with `op`, leaving the result in x on `root`.

    Shapes: x the same shape and dtype on every rank (any shape, any size including 0).
            On `root` x is overwritten with the result; on every other rank x is left
            unchanged (interior ranks combine into a copy). Returns x.
    Steps:  with vr = (rank - root) mod p, for mask = 1, 2, 4, ... < p:
            1. if vr has bit `mask` set, send the partial result to vr - mask and stop;
            2. otherwise, if vr + mask < p, receive that child's partial result and
               combine it into ours with `op`.
    Cost:   ceil(log2 p) * (alpha + n*s*beta + n*gamma); each rank sends at most 1 message.
    """
    # BEGIN YOUR CODE  (HW1 task 1.2)
    raise NotImplementedError("HW1 task 1.2: reduce is not implemented yet (see assignments/hw1/README.md)")
    # END YOUR CODE
