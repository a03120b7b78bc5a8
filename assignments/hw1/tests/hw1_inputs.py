"""Homework 1 test harness, the inputs: every rank's x for a case, made in the test process.

    xs = make_inputs(case, p)            # [rank 0's x, ..., rank p-1's x]
    constants(case, p)                   # inputs "constant": the integer each rank holds everywhere

The values come from the grading's secret (assignments/common/rank_inputs.py) and each rank
receives only its own x, so a rank cannot rebuild another's: an all-reduce that sends nothing
fails. Two kinds of case:
  "random"    values drawn per rank (near 1 for prod; small integers for integer dtypes);
  "constant"  rank r holds one integer c[r] everywhere, the c[r] different and drawn from the
              secret, small enough that every sum (and max) is exact in the case's dtype: the
              closed form of the old "rank r holds r", which a rank could compute from its rank.
"""

from __future__ import annotations

import torch

from assignments.common.rank_inputs import distinct_ints, generator
from assignments.hw1.tests.hw1_ranks import DTYPES, Case

# the largest integer such that sums of p of them stay exact (float16: 2^11, bfloat16: 2^8, uint8: 255)
EXACT_INTEGERS = {"float16": 2048, "bfloat16": 256, "uint8": 255}
CONSTANT_HIGH = 1000          # constants are drawn from 1 .. min(this, EXACT_INTEGERS // p)


def constants(case: Case, p: int) -> list[int]:
    """The integer each rank holds everywhere in a "constant" case (different per rank)."""
    high = min(CONSTANT_HIGH, EXACT_INTEGERS.get(case.dtype, CONSTANT_HIGH * p) // p)
    return distinct_ints(p, 1, high, "hw1 constants", repr(case), p)


def make_inputs(case: Case, p: int) -> list[torch.Tensor]:
    """Every rank's x for `case` at p (the same on every call with the same secret)."""
    shape = tuple(case.shape) if case.shape is not None else (case.n,)
    dtype = DTYPES[case.dtype]
    if case.inputs == "constant":
        return [torch.full(shape, c, dtype=dtype) for c in constants(case, p)]
    if case.inputs != "random":
        raise ValueError(f"hw1 inputs: unknown kind {case.inputs!r} (\"random\" or \"constant\")")
    return [_random(case, shape, dtype, generator("hw1 random", repr(case), p, r)) for r in range(p)]


def _random(case: Case, shape: tuple, dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    numel = 1
    for d in shape:
        numel *= d
    if dtype.is_floating_point:
        if case.op == "prod":                              # near 1: products stay well scaled
            values = torch.rand(numel, generator=g, dtype=torch.float64) + 0.5
        else:
            values = torch.randn(numel, generator=g, dtype=torch.float64)
    else:
        low, high = (1, 3) if case.op == "prod" else ((0, 32) if dtype == torch.uint8 else (-1000, 1000))
        values = torch.randint(low, high, (numel,), generator=g, dtype=torch.int64)
    return values.to(dtype).reshape(shape)
