"""The hidden tests' cases: which inputs each function sees at each world size, and the suites
that run them (once per world size and backend, shared by every hidden test file)."""

from __future__ import annotations

from assignments.hw1.tests.hw1_harness import Case, Suite
from minitorch_dist import SimNetwork

ALL_REDUCES = ("naive_all_reduce", "tree_all_reduce", "butterfly_all_reduce", "ring_all_reduce")
WORLD_SIZES = (1, 2, 3, 4, 5, 6, 7, 8)
VARIANT_WORLD_SIZES = (3, 4)           # dtype and op variants run at these p
TRAFFIC_WORLD_SIZES = (2, 3, 5, 6, 8)
MPI_WORLD_SIZE = 3
LARGE_WORLD_SIZES = (2, 3)             # ring steps with chunks of 2 MiB and more
VARIANTS = {                            # name -> Case fields
    "float64": {"dtype": "float64"},
    "int32": {"dtype": "int32"},
    "int64": {"dtype": "int64"},
    "float16": {"dtype": "float16"},
    "bfloat16": {"dtype": "bfloat16"},
    "uint8": {"dtype": "uint8"},
    "max": {"op": "max"},
    "min": {"op": "min", "dtype": "int64"},
    "prod": {"op": "prod", "dtype": "float64"},
}


def big(p: int) -> int:
    """A large n that p does not divide: chunks differ by one element."""
    return 1000 + 7 * p + 3


def large(p: int) -> int:
    """n with chunks of at least 2 MiB of float32: more than the sockets buffer, so a ring step that
    sends before it receives (instead of sendrecv) waits forever on gloo, as on MPI with large messages."""
    return p * (1 << 19) + 1


def sizes(fn: str, p: int, seed: int, **fields) -> list[Case]:
    """n = 0, 1, p - 1 and a 2-D and a 0-dim x (tag "sizes")."""
    cases = [Case(fn, 0, tag="sizes", **fields), Case(fn, 1, seed=seed, tag="sizes", **fields),
             Case(fn, p - 1, seed=seed + 1, tag="sizes", **fields)]
    if fn not in ("reduce_scatter_", "all_gather_"):          # these take a flat buffer
        cases += [Case(fn, 15, shape=(3, 5), seed=seed + 2, tag="sizes", **fields),
                  Case(fn, 1, shape=(), seed=seed + 3, tag="sizes", **fields)]
    return cases


def all_reduce_cases(fn: str, p: int) -> list[Case]:
    cases = [Case(fn, big(p), inputs="constant", tag="core"), Case(fn, big(p), seed=1, tag="core")]
    cases += sizes(fn, p, seed=2)
    if p in VARIANT_WORLD_SIZES:
        for name, fields in VARIANTS.items():
            cases.append(Case(fn, 60 + p, seed=10, tag=f"variant:{name}", **fields))
        cases.append(Case(fn, 60 + p, inputs="constant", op="max", tag="variant:max"))
    return cases


def tree_cases(p: int) -> list[Case]:
    """broadcast and reduce from several roots (0, the last rank, one in the middle)."""
    roots = sorted({0, p - 1, p // 2})
    cases = []
    for root in roots:
        cases += [Case("broadcast", big(p), root=root, seed=20 + root, tag="core"),
                  Case("reduce", big(p), root=root, seed=30 + root, tag="core"),
                  Case("reduce", big(p), root=root, inputs="constant", op="max", tag="core")]
    cases += sizes("broadcast", p, seed=40, root=p - 1) + sizes("reduce", p, seed=50, root=p // 2)
    cases += [Case("broadcast", 33, dtype="int64", root=p // 2, seed=60, tag="variant"),
              Case("broadcast", 33, dtype="bfloat16", root=p - 1, seed=61, tag="variant"),
              Case("reduce", 33, dtype="int32", root=p - 1, seed=62, tag="variant"),
              Case("reduce", 33, dtype="float16", op="min", root=0, seed=63, tag="variant")]
    return cases


def ring_cases(p: int) -> list[Case]:
    """reduce_scatter_ and all_gather_ on flat buffers, and the provided wrappers over them."""
    cases = []
    for fn in ("reduce_scatter_", "all_gather_"):
        cases += [Case(fn, big(p), inputs="constant", tag="core"), Case(fn, big(p), seed=70, tag="core"),
                  Case(fn, 8 * p, seed=71, tag="core")]
        cases += sizes(fn, p, seed=72)
        cases += [Case(fn, 3 * p + 1, dtype="int64", seed=76, tag="variant"),
                  Case(fn, 3 * p + 2, dtype="float16", seed=77, tag="variant")]
    cases += [Case("reduce_scatter_", 5 * p, op="max", seed=78, tag="variant"),
              Case("all_gather", 6, shape=(2, 3), seed=80, tag="wrapper"),
              Case("all_gather", 1, shape=(), seed=81, tag="wrapper"),
              Case("reduce_scatter", 6 * p, shape=(2 * p, 3), seed=82, tag="wrapper"),
              Case("reduce_scatter", p, dtype="int32", op="max", seed=83, tag="wrapper")]
    return cases


def hidden_cases(p: int) -> list[Case]:
    cases = []
    for fn in ALL_REDUCES:
        cases += all_reduce_cases(fn, p)
    return cases + tree_cases(p) + ring_cases(p)


def small_cases(p: int) -> list[Case]:
    """A lighter set for the sim and mpi backends: the core cases and the edge sizes."""
    keep = ("core", "sizes", "wrapper")
    return [c for c in hidden_cases(p) if c.tag in keep]


def large_cases(p: int) -> list[Case]:
    return [Case(fn, large(p), seed=79, tag="large") for fn in ("reduce_scatter_", "all_gather_")]


GLOO = Suite(hidden_cases)
LARGE = Suite(large_cases)               # its own launch: the other tests do not move these megabytes
SIM = Suite(small_cases, backend="sim", network=SimNetwork(alpha=1e-5, beta=1e-9))
MPI = Suite(small_cases, backend="mpi")
