"""Homework 2, task 2.7 (bonus): Moshpit-style group all-reduce (Ryabinin et al. 2021).

Arrange p = M^d ranks on a d-dimensional grid with side M (rank r's coordinates are its d
base-M digits). Round j averages x inside the groups of M ranks that differ only in digit j,
with the provided all_reduce on a sub-group; the next round regroups along the next digit.
Each round keeps the global mean; after d rounds every rank holds it exactly (up to rounding).

    Cost: d all-reduces among M ranks instead of one among M^d.
"""

from __future__ import annotations

import torch

__all__ = ["grid_groups", "moshpit_average_"]


def grid_groups(p: int, side: int) -> list[list[list[int]]]:
    """groups[j] = the rank lists of round j (each of `side` ranks differing only in digit j).

    Raises ValueError unless p is a power of `side` (side >= 2), naming p and side.
    """
    d, n = 0, 1
    while n < p:
        n, d = n * side, d + 1
    if side < 2 or n != p:
        raise ValueError(f"moshpit: {p} ranks are not a {side}-sided grid (p must be side**d, side >= 2)")
    rounds = []
    for j in range(d):
        step = side ** j
        rounds.append([[base + k * step for k in range(side)]
                       for base in range(p) if (base // step) % side == 0])
    return rounds


def moshpit_average_(x: torch.Tensor, group, side: int = 2) -> torch.Tensor:
    """In place: after d = log_side(p) rounds of group averaging, x is the mean over all ranks.

    Steps: for each round of grid_groups(p, side): take the group holding this rank, make it a
    sub-group (group.subgroup(ranks), called by its members only), all_reduce x with op="avg".
    p == 1: unchanged. Returns x.
    """
    # BEGIN YOUR CODE  (HW2 task 2.7)
    raise NotImplementedError("HW2 task 2.7: moshpit_average_ is not implemented yet (see assignments/hw2/README.md)")
    # END YOUR CODE
