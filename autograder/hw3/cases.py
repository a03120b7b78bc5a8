"""The hidden tests' cases: which compressors, sizes and inputs run at each world size and backend,
and the suites that run them (once per world size; each test function runs in its own process and
launches only the cases it judges).

Sizes are chosen so that neither the chunk nor p divides n (37, 23, 29, 45 ...), with an empty tensor,
a chunk larger than the tensor, k = 0 and k = n; inputs include large values (1e6), negative values,
exact zeros, grid values that must come back exactly, ties in |x| for top-k, and spikes at the
same positions on every rank (top-k indices that coincide across ranks must add up).
"""

from __future__ import annotations

import functools

from assignments.common import case_suites
from assignments.hw3.tests.hw3_harness import COUNTED, HW3_LAUNCH, Case, Suite
from assignments.hw3.tests.hw3_inputs import make_inputs
from assignments.hw3.tests.hw3_powersgd import tiny_mlp
from assignments.hw3.tests.hw3_ranks import OPS, run_cases_on_rank

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
# scored by their reports' snapshots, which rank code can rewrite. On gloo with the kernel measuring,
# each such case runs in a launch of its own (rank_runs.run_batched apart=) and its snapshots, with
# what the harness's run does besides them (DataParallel's broadcast of the model, register_comm_hook's
# check: one all-gather of an int64), must add up to that launch's counters (case_suites.counted_by).
STEPPED = ("powersgd_ddp", "allreduce_ddp", "compress_ddp")
BOUNDARY_COUNTED = {"messages": lambda c: c.messages_sent, "bytes_sent": lambda c: c.bytes_sent,
                    "collectives": lambda c: sum(c.op(op).calls for op in OPS)}


@functools.cache
def _model_broadcast() -> tuple[int, int]:
    tensors = list(tiny_mlp().parameters()) + list(tiny_mlp().buffers())
    return len(tensors), sum(t.nbytes for t in tensors)


def besides_steps(case: Case, rank: int = 0, p: int = 1) -> dict:
    """The collectives of a HookedDDP run outside its steps' snapshots (hw3_powersgd.run_hooked)."""
    if case.kind not in STEPPED:
        return {}
    calls, nbytes = _model_broadcast()
    hook_check = {} if case.kind == "allreduce_ddp" else {"all_gather_calls": 1, "all_gather_bytes": 8}
    return {"broadcast_calls": calls, "broadcast_bytes": nbytes, **hook_check}


def _snapshots(case: Case, rep: dict):
    comm = rep.get("comm")
    if case.kind in STEPPED:
        return comm if isinstance(comm, list) else None
    return [comm] if isinstance(comm, dict) else None


_steps_counted = case_suites.counted_by(COUNTED, _snapshots, besides=besides_steps)
_boundary_counted = case_suites.counted_by(BOUNDARY_COUNTED, lambda case, rep: [rep] if "bytes_sent" in rep else None)


def _counted(case: Case, per_rank: list, counters: list) -> str | None:
    return (_boundary_counted if case.kind.startswith("boundary_") else _steps_counted)(case, per_rank, counters)


def per_step_traffic(case: Case, p: int) -> bool:
    return p > 1 and (case.kind in STEPPED or case.kind == "powersgd_rank1" or case.kind.startswith("boundary_"))


_, StepSuite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, check_wire=True, apart=per_step_traffic,
                                counted=_counted, **HW3_LAUNCH)


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
