"""The hidden tests' cases: which compressors, sizes and inputs run at each world size and backend,
and the suites that run them (once per world size; each test function runs in its own process and
launches only the cases it judges).

Sizes are chosen so that neither the chunk nor p divides n (37, 23, 29, 45 ...), with an empty tensor,
a chunk larger than the tensor, k = 0 and k = n; inputs include large values (1e6), negative values,
exact zeros, grid values that must come back exactly, ties in |x| for top-k, and spikes at the
same positions on every rank (top-k indices that coincide across ranks must add up).
"""

from __future__ import annotations

from assignments.hw3.tests.hw3_harness import Case, Suite
from assignments.hw3.tests.hw3_step_traffic import StepSuite

WORLD_SIZES = (1, 2, 3, 4)
COMM_WORLD_SIZES = (2, 3, 4)
ROUND_TRIP_WORLD_SIZES = (1, 2)
BAD_WORLD_SIZE = 2
SIM_WORLD_SIZE = 8

UINT8_ROUND_TRIPS = [Case("uint8_round_trip", 37, 5), Case("uint8_round_trip", 23, 8, data="big"),
                     Case("uint8_round_trip", 45, 7, data="grid"), Case("uint8_round_trip", 9, 1, data="grid"),
                     Case("uint8_round_trip", 5, 16), Case("uint8_round_trip", 0, 4)]
SIGN_ROUND_TRIPS = [Case("sign_round_trip", 37, 5), Case("sign_round_trip", 13, 13), Case("sign_round_trip", 9, 4),
                    Case("sign_round_trip", 20, 6, data="big"), Case("sign_round_trip", 0, 3)]
QUANT_ALL_REDUCES = [Case("uint8_all_reduce", 37, 5), Case("uint8_all_reduce", 23, 8, "sum", "big"),
                     Case("uint8_all_reduce", 45, 7, data="grid"), Case("uint8_all_reduce", 0, 4),
                     Case("sign_all_reduce", 29, 6), Case("sign_all_reduce", 37, 5, "sum")]
TOPK_ROUND_TRIPS = [Case("topk_round_trip", 30, 7, data="ties"), Case("topk_round_trip", 41, 5, data="ties"),
                    Case("topk_round_trip", 13, 13, data="ties"), Case("topk_round_trip", 20, 0),
                    Case("topk_round_trip", 17, 3, data="big")]
SPARSE_ALL_REDUCES = [Case("topk_all_reduce", 30, 4, data="ties"), Case("topk_all_reduce", 37, 5, "sum"),
                      Case("topk_all_reduce", 30, 4, data="spiky"), Case("topk_all_reduce", 45, 6, "sum", "spiky"),
                      Case("topk_all_reduce", 17, 3, data="big"), Case("randomk_all_reduce", 40, 6),
                      Case("randomk_all_reduce", 50, 5, "sum"), Case("randomk_all_reduce", 97, 10, data="big")]
EF_CASES = [Case("ef_grid", 12, data="dyadic"), Case("ef_topk", 20, 3, data="dyadic"),
            Case("ef_topk", 13, 2, data="dyadic")]
QUADRATIC = [Case("ef_sign_quadratic")]
BAD = [Case("bad_quantize"), Case("bad_sparsify"), Case("bad_error_feedback")]


def _cases(cases):
    return lambda p: list(cases)


ROUND_TRIP = Suite(_cases(UINT8_ROUND_TRIPS + SIGN_ROUND_TRIPS + TOPK_ROUND_TRIPS))
QUANT = Suite(_cases(QUANT_ALL_REDUCES))
SPARSE = Suite(_cases(SPARSE_ALL_REDUCES))
EF = Suite(_cases(EF_CASES))
CONVERGE = Suite(_cases(QUADRATIC))
BAD_INPUT = Suite(_cases(BAD))
SIM_CASES = {"task3_1": [Case("uint8_all_reduce", 37, 5), Case("sign_all_reduce", 29, 6, "sum")],
             "task3_2": [Case("topk_all_reduce", 30, 4, data="spiky"), Case("randomk_all_reduce", 40, 6)],
             "task3_3": [Case("ef_topk", 20, 3, data="dyadic"), Case("ef_grid", 12, data="dyadic")]}
SIM = Suite(_cases([c for cs in SIM_CASES.values() for c in cs]), backend="sim")


# Traffic per step (tasks 3.4-3.6): HookedDDP's steps, powersgd_hook's call and the boundary's step are
# StepSuites (hw3_step_traffic.py, shared with the public tests): in a grading each such case runs alone,
# its snapshots held to its run's counters.

# tasks 3.4 and 3.5: training steps of HookedDDP (hw3_powersgd.py), each checked against torch's
# powerSGD_hook or a replay in the grading process
POWERSGD_DDP = {2: [Case("powersgd_ddp", 4, 2, data="ef,warm"), Case("powersgd_ddp", 4, 1, data="plain")],
                3: [Case("powersgd_ddp", 4, 3, data="ef,warm")]}
POWERSGD_PARTS = [Case("powersgd_rank1", param=1), Case("powersgd_rank1", param=2), Case("orthogonalize", 9, 3),
                  Case("orthogonalize", 6, 1)]
HOOKED_DDP = [Case("allreduce_ddp", 3), Case("compress_ddp", 4, 60, data="topk"),
              Case("compress_ddp", 4, 45, data="topk_ef"), Case("compress_ddp", 3, 50, data="uint8")]
POWERSGD = StepSuite(lambda p: POWERSGD_DDP.get(p, []) + POWERSGD_PARTS)
HOOKS = StepSuite(lambda p: list(HOOKED_DDP))
TRAINING = Suite(lambda p: [Case("char_training", 60, data=d) for d in ("powersgd", "topk_ef", "topk")])

# task 3.6 (bonus): one step of the split CharTransformer (hw3_boundary.py); param is the boundary
BOUNDARY_EXACT = StepSuite(lambda p: [Case("boundary_exact", param=b) for b in (0, 1, 3)])
BOUNDARY_LINKS = StepSuite(lambda p: [Case("boundary_uint8", param=0), Case("boundary_topk", param=1),
                                  Case("boundary_lowrank", param=2), Case("boundary_topk", param=3)])
LOWRANK = Suite(lambda p: [Case("lowrank_round_trip", 4, 2, data="exact"),
                           Case("lowrank_round_trip", 9, 3, data="exact"),
                           Case("lowrank_round_trip", 1, 1, data="general"),
                           Case("lowrank_round_trip", 6, 3, data="general")])
BOUNDARY_BAD = Suite(lambda p: [Case("bad_boundary")])
