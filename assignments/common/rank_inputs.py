"""Test inputs that a rank cannot rebuild: made in the test process from a secret, and each rank
given only its own (launch's rank_args).

    g = generator("hw1", repr(case), p, r)          # in the test process: rank r's values for a case
    c = distinct_ints(p, 1, 100, "hw1", repr(case))  # p different integers, one per rank
    rank_args = for_ranks([xs_of_case0, xs_of_case1])   # rank r gets ([case0's x for r, case1's x for r],)

Why: when a rank can make the inputs itself (from a seed in the case, or a closed form such as
"rank r holds r"), an all-reduce that sends nothing can rebuild every other rank's input and return
the right answer. Here the values depend on a secret the ranks never see, and the rank processes
(gloo, mpi) receive their own inputs only; the test process keeps every input and computes the
expected results itself. On sim every rank is a thread of one process that holds all the inputs:
its value checks are no defence against this (gloo's and mpi's are).

The secret, read in the test process only:
  AUTOGRADER_INPUT_SECRET       the secret itself (to try other inputs by hand);
  AUTOGRADER_INPUT_SECRET_FILE  a file holding it: what the grader sets, a file it draws per grading
                                in its root-only records folder (autograder/jobs.py). The grader never
                                puts the secret itself in an environment: the zygote that forks the
                                rank hosts holds every job's environment in its memory;
  neither: PUBLIC_SECRET, fixed, so that the public tests a student runs are reproducible.
"""

from __future__ import annotations

import functools
import hashlib
import os

import torch

SECRET_VAR = "AUTOGRADER_INPUT_SECRET"
SECRET_FILE_VAR = "AUTOGRADER_INPUT_SECRET_FILE"
PUBLIC_SECRET = "minitorch-dist public inputs"


def secret() -> bytes:
    """The inputs' secret in this process (see the module doc for where it comes from)."""
    return _secret(os.environ.get(SECRET_VAR), os.environ.get(SECRET_FILE_VAR))


@functools.lru_cache(maxsize=4)
def _secret(value: str | None, path: str | None) -> bytes:
    if value:
        return value.encode()
    if path:
        try:
            with open(path, "rb") as f:
                text = f.read(4096).strip()
        except OSError as exc:
            raise RuntimeError(f"{SECRET_FILE_VAR}={path}: the inputs' secret could not be read ({exc}); the "
                               f"grader writes it before the tests start: grade again, or unset the variable "
                               f"to use the public inputs") from None
        if not text:
            raise RuntimeError(f"{SECRET_FILE_VAR}={path} is empty: the grader writes a secret there")
        return text
    return PUBLIC_SECRET.encode()


def seed(*key) -> int:
    """A 63-bit seed from the secret and `key` (anything with a stable repr: names, numbers, a case)."""
    digest = hashlib.blake2b(repr(key).encode(), key=secret()[:64], digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def generator(*key) -> torch.Generator:
    """A CPU torch.Generator seeded from the secret and `key`."""
    return torch.Generator().manual_seed(seed(*key))


def distinct_ints(count: int, low: int, high: int, *key) -> list[int]:
    """`count` different integers in [low, high], in an order fixed by the secret and `key`."""
    if high - low + 1 < count:
        raise ValueError(f"distinct_ints: {count} different integers do not fit in [{low}, {high}]")
    order = torch.randperm(high - low + 1, generator=generator("distinct", *key))[:count]
    return [low + int(i) for i in order]


def for_ranks(per_case: list[list]) -> list[tuple]:
    """launch()'s rank_args from each case's per-rank inputs: rank r gets one argument, the list of
    its own input in every case (per_case[i][r] for each case i)."""
    if not per_case:
        return []
    p = len(per_case[0])
    if any(len(xs) != p for xs in per_case):
        raise ValueError(f"for_ranks: every case needs one input per rank, got {[len(xs) for xs in per_case]}")
    return [([xs[r] for xs in per_case],) for r in range(p)]
