"""Homework 1, task 1.3: reduce-scatter and all-gather around a ring.

Ranks form a ring, each sending to its right neighbour (rank + 1) and receiving from
its left (rank - 1) in the same step (group.sendrecv: both directions at once, so no
rank waits for another to finish sending). The buffer of n elements is cut into p
chunks (common.chunk_bounds: sizes differ by at most one, some empty when n < p).
In p - 1 steps every chunk travels around the ring once:

- reduce-scatter: each step adds the incoming chunk into ours before passing it on;
  at the end rank r holds chunk r combined over all ranks.
- all-gather: each step stores the incoming chunk; at the end every rank holds all.

Together they make the ring all-reduce (all_reduce.py), bandwidth-optimal for any p.
"""

from __future__ import annotations

import torch

from .common import check_op, chunk_bounds, combine_


def reduce_scatter_(buf: torch.Tensor, group, op: str = "sum") -> torch.Tensor:
    """Reduce the chunks of a flat buffer around the ring; afterwards rank r owns chunk r.

    Shapes: buf (n,), 1-D and contiguous, the same n and dtype on every rank; chunks
            from chunk_bounds(n, p). Updated in place: afterwards chunk r of buf on rank r
            holds chunk r combined with `op` over all ranks; other chunks hold partial
            results. Returns the view of chunk r.
    Steps:  with right = r + 1 and left = r - 1 (mod p), for step = 0 .. p-2:
            1. send chunk (r - step - 1) mod p to the right while receiving chunk
               (r - step - 2) mod p from the left into a scratch buffer;
            2. combine the received chunk into that chunk of buf.
            (Chunk r arrives last, carrying all p contributions.)
    Cost:   (p-1)*alpha + (p-1)/p * n*s*(beta + gamma); p-1 messages per rank.
    """
    # BEGIN SOLUTION  (HW1 task 1.3)
    check_op(op, "reduce_scatter_")
    if buf.dim() != 1 or not buf.is_contiguous():
        raise ValueError(f"reduce_scatter_: buf must be 1-D and contiguous, got shape {tuple(buf.shape)}")
    p, r = group.size, group.rank
    bounds = chunk_bounds(buf.numel(), p)
    right, left = (r + 1) % p, (r - 1) % p
    scratch = torch.empty(bounds[0][1] - bounds[0][0], dtype=buf.dtype, device=buf.device)
    incoming = {d1 - d0: scratch[:d1 - d0] for d0, d1 in bounds}   # a view per chunk size (two at most)
    s0, s1 = bounds[(r - 1) % p]
    chunk = buf[s0:s1]                                # the chunk we send in step 0
    for step in range(p - 1):
        d0, d1 = bounds[(r - step - 2) % p]
        into = buf[d0:d1]
        group.sendrecv(chunk, right, incoming[d1 - d0], left)     # 1.
        combine_(into, incoming[d1 - d0], op)                       # 2.
        chunk = into                                  # the chunk just combined goes on next step
    start, stop = bounds[r]
    return buf[start:stop]
    # END SOLUTION


def all_gather_(buf: torch.Tensor, group) -> torch.Tensor:
    """Circulate the chunks of a flat buffer around the ring until every rank has all of them.

    Shapes: buf (n,), 1-D and contiguous, the same n and dtype on every rank; chunks
            from chunk_bounds(n, p). On entry only chunk r of buf on rank r is read;
            afterwards every chunk of buf holds its owner's chunk. Returns buf.
    Steps:  for step = 0 .. p-2: send chunk (r - step) mod p to the right while receiving
            chunk (r - step - 1) mod p from the left straight into its place in buf.
    Cost:   (p-1)*alpha + (p-1)/p * n*s*beta; p-1 messages per rank.
    """
    # BEGIN SOLUTION  (HW1 task 1.3)
    if buf.dim() != 1 or not buf.is_contiguous():
        raise ValueError(f"all_gather_: buf must be 1-D and contiguous, got shape {tuple(buf.shape)}")
    p, r = group.size, group.rank
    bounds = chunk_bounds(buf.numel(), p)
    right, left = (r + 1) % p, (r - 1) % p
    s0, s1 = bounds[r]
    chunk = buf[s0:s1]                                # our own chunk goes first
    for step in range(p - 1):
        d0, d1 = bounds[(r - step - 1) % p]
        into = buf[d0:d1]
        group.sendrecv(chunk, right, into, left)
        chunk = into                                  # the chunk just received goes on next step
    return buf
    # END SOLUTION


def all_gather(x: torch.Tensor, group) -> torch.Tensor:
    """Concatenate every rank's `x` along dim 0 (provided: wraps all_gather_).

    Shapes: x (m, ...) the same shape on every rank -> (p*m, ...), rank r's x at rows
            r*m .. (r+1)*m - 1; a 0-dim x gives (p,).
    """
    out_shape = (group.size,) if x.dim() == 0 else (group.size * x.shape[0], *x.shape[1:])
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    out_flat = out.view(-1)
    m = x.numel()
    out_flat[group.rank * m:(group.rank + 1) * m].copy_(x.reshape(-1))
    all_gather_(out_flat, group)
    return out


def reduce_scatter(x: torch.Tensor, group, op: str = "sum") -> torch.Tensor:
    """Combine `x` over all ranks and return rank r's share (provided: wraps reduce_scatter_).

    Shapes: x (p*m, ...) the same shape on every rank -> (m, ...), rows r*m .. (r+1)*m - 1
            of the combined tensor. x itself is not modified.
    """
    p = group.size
    if x.dim() == 0 or x.shape[0] % p != 0:
        raise ValueError(f"reduce_scatter: rank {group.rank}: dim 0 of x (shape {tuple(x.shape)}) must be "
                         f"divisible by the group size {p}; pad x or use reduce_scatter_ on a flat buffer")
    buf = x.reshape(-1).clone()
    mine = reduce_scatter_(buf, group, op)
    return mine.view(x.shape[0] // p, *x.shape[1:])
