"""Homework 1, tasks 1.4-1.7: all-reduce four ways, from point-to-point messages only.

Versions, simplest first (cost for n elements of s bytes on p ranks, see
minitorch_dist.cost_model):

    naive_all_reduce      gather to rank 0, combine, send back   2(p-1)*(alpha + n*s*beta) at the root
    tree_all_reduce       binomial reduce, binomial broadcast    2*ceil(log2 p)*(alpha + n*s*beta)
    butterfly_all_reduce  recursive doubling                     log2 p*(alpha + n*s*beta), p = 2^k
    ring_all_reduce       reduce-scatter, then all-gather        2(p-1)*alpha + 2(p-1)/p*n*s*beta

Every version works in place on x (any shape, contiguous, any dtype, any n >= 0, any p),
returns x, and leaves the same bits on every rank.
"""

from __future__ import annotations

import torch

from .common import check_op, combine_, flat
from .ring import all_gather_, reduce_scatter_
from .tree import broadcast, reduce


def naive_all_reduce(x: torch.Tensor, group, op: str = "sum") -> torch.Tensor:
    """Combine `x` over all ranks of `group` with `op`, in place, through rank 0.

    Shapes: x the same shape and dtype on every rank; afterwards every rank's x holds
            the result. Returns x.
    Steps:  1. every rank but 0 sends its x to rank 0;
            2. rank 0 receives them one by one (ranks 1, 2, ..., p-1) and combines each
               into its own x;
            3. rank 0 sends the result to ranks 1, ..., p-1, which receive it into x.
    Cost:   2(p-1)*(alpha + n*s*beta) + (p-1)*n*gamma: rank 0 receives and sends p-1
            messages of the whole buffer; every other rank sends and receives one.
    """
    # BEGIN SOLUTION  (HW1 task 1.4)
    check_op(op, "naive_all_reduce")
    buf = flat(x, "naive_all_reduce")
    p = group.size
    if group.rank != 0:
        group.send(buf, 0)                              # 1.
        group.recv(buf, 0)                              # 3.
        return x
    incoming = torch.empty_like(buf)
    for src in range(1, p):                             # 2.
        group.recv(incoming, src)
        combine_(buf, incoming, op)
    for dst in range(1, p):                             # 3.
        group.send(buf, dst)
    return x
    # END SOLUTION


def tree_all_reduce(x: torch.Tensor, group, op: str = "sum") -> torch.Tensor:
    """Combine `x` over all ranks of `group` with `op`, in place, with two binomial trees.

    Shapes: x the same shape and dtype on every rank; afterwards every rank's x holds
            the result. Returns x.
    Steps:  1. reduce to rank 0 along a binomial tree (tree.reduce);
            2. broadcast from rank 0 along a binomial tree (tree.broadcast).
    Cost:   2*ceil(log2 p)*(alpha + n*s*beta) + ceil(log2 p)*n*gamma.
    """
    # BEGIN SOLUTION  (HW1 task 1.5)
    check_op(op, "tree_all_reduce")
    reduce(x, group, root=0, op=op)                     # 1.
    broadcast(x, group, root=0)                         # 2.
    return x
    # END SOLUTION


def butterfly_all_reduce(x: torch.Tensor, group, op: str = "sum") -> torch.Tensor:
    """Combine `x` over all ranks of `group` with `op`, in place, by recursive doubling.

    Shapes: x the same shape and dtype on every rank; afterwards every rank's x holds
            the result. Returns x.
    Steps:  q = the largest power of two <= p, extra = p - q (MPICH's scheme):
            1. fold: among ranks 0 .. 2*extra-1, each even rank sends its x to the odd
               rank above it and sits out; the odd rank combines it into its own;
            2. the q remaining ranks, renumbered 0..q-1 (odd rank r < 2*extra becomes r // 2,
               rank r >= 2*extra becomes r - extra), run log2 q rounds: in round k exchange
               the whole buffer with the rank whose new number differs in bit k (sendrecv)
               and combine;
            3. unfold: each odd rank r < 2*extra sends the result to rank r - 1.
    Cost:   p a power of two: log2 p * (alpha + n*s*beta + n*gamma), log2 p messages per rank;
            otherwise two more full-buffer rounds: (log2 q + 2)*(alpha + n*s*beta) + ...
    """
    # BEGIN SOLUTION  (HW1 task 1.6)
    check_op(op, "butterfly_all_reduce")
    buf = flat(x, "butterfly_all_reduce")
    p, r = group.size, group.rank
    if p == 1:
        return x
    q = 1 << (p.bit_length() - 1)
    extra = p - q
    incoming = torch.empty_like(buf)
    if r < 2 * extra:                                   # 1. fold the extra ranks in
        if r % 2 == 0:
            group.send(buf, r + 1)
            group.recv(buf, r + 1)                      # 3. (receiving side)
            return x
        group.recv(incoming, r - 1)
        combine_(buf, incoming, op)
        new_rank = r // 2
    else:
        new_rank = r - extra
    mask = 1
    while mask < q:                                     # 2. recursive doubling
        partner_new = new_rank ^ mask
        partner = 2 * partner_new + 1 if partner_new < extra else partner_new + extra
        group.sendrecv(buf, partner, incoming, partner)
        combine_(buf, incoming, op)
        mask <<= 1
    if r < 2 * extra:                                   # 3. unfold
        group.send(buf, r - 1)
    return x
    # END SOLUTION


def ring_all_reduce(x: torch.Tensor, group, op: str = "sum") -> torch.Tensor:
    """Combine `x` over all ranks of `group` with `op`, in place, around a ring.

    Shapes: x the same shape and dtype on every rank, any n >= 0 (chunks may differ by
            one element, some are empty when n < p); afterwards every rank's x holds the
            result. Returns x.
    Steps:  1. view x as a flat buffer split into p chunks;
            2. reduce-scatter, p-1 rounds (ring.reduce_scatter_): rank r owns chunk r;
            3. all-gather, p-1 rounds (ring.all_gather_).
    Cost:   2(p-1)*alpha + 2(p-1)/p * n*s*beta + (p-1)/p * n*gamma; 2(p-1) messages per rank.
    """
    # BEGIN SOLUTION  (HW1 task 1.7)
    check_op(op, "ring_all_reduce")
    buf = flat(x, "ring_all_reduce")                    # 1.
    reduce_scatter_(buf, group, op)                     # 2.
    all_gather_(buf, group)                             # 3.
    return x
    # END SOLUTION
