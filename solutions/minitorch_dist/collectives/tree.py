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
    # BEGIN SOLUTION  (HW1 task 1.2)
    check_root(root, group, "broadcast")
    buf = flat(x, "broadcast")
    p = group.size
    vr = (group.rank - root) % p
    mask = 1
    while mask < p:                                     # 1. find the parent: lowest set bit
        if vr & mask:
            group.recv(buf, (vr - mask + root) % p)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:                                     # 2. children, farthest first
        if vr + mask < p:
            group.send(buf, (vr + mask + root) % p)
        mask >>= 1
    return x
    # END SOLUTION


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
    # BEGIN SOLUTION  (HW1 task 1.2)
    check_root(root, group, "reduce")
    check_op(op, "reduce")
    buf = flat(x, "reduce")
    p = group.size
    vr = (group.rank - root) % p
    acc = buf                                           # the root reduces into x itself
    incoming = None
    mask = 1
    while mask < p:
        if vr & mask:                                   # 1. hand the partial result up
            group.send(acc, (vr - mask + root) % p)
            break
        if vr + mask < p:                               # 2. take a child's partial result
            if incoming is None:
                incoming = torch.empty_like(buf)
                if vr != 0:
                    acc = buf.clone()                   # leave a non-root's x unchanged
            group.recv(incoming, (vr + mask + root) % p)
            combine_(acc, incoming, op)
        mask <<= 1
    return x
    # END SOLUTION
