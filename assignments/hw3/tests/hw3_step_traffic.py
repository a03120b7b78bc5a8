"""Traffic per case and per step, held to the kernel in a grading: the suites whose verdicts score a
case's or each step's collectives, public and hidden tests alike.

The compressed all-reduces and error feedback score their case-wide "comm" (hw3_harness.scored_traffic);
HookedDDP's steps, powersgd_hook's call and the boundary's step are scored by their reports' snapshots
(tasks 3.4-3.6). Rank code can rewrite both. On gloo with the kernel measuring (a grading only), each
such case runs in a launch of its own (rank_runs.run_batched apart=) and its snapshots, with what the
harness's run does besides them (DataParallel's broadcast of the model, register_comm_hook's check:
one all-gather of an int64), must add up to that launch's counters (case_suites.counted_by). Without
the kernel variable (a student's own run) a StepSuite runs its cases in one launch per world size, as
Suite does.
"""

from __future__ import annotations

import functools

from assignments.common import case_suites
from assignments.hw3.tests.hw3_harness import COUNTED, HW3_LAUNCH, Case, scored_traffic
from assignments.hw3.tests.hw3_inputs import make_inputs
from assignments.hw3.tests.hw3_powersgd import tiny_mlp
from assignments.hw3.tests.hw3_ranks import OPS, run_cases_on_rank

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


def bound_alone(case: Case, p: int) -> bool:
    """A case whose traffic is scored, case-wide (hw3_harness.scored_traffic) or per step: alone in a grading."""
    return scored_traffic(case, p) or per_step_traffic(case, p)


_, StepSuite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, check_wire=True, apart=bound_alone,
                                counted=_counted, **HW3_LAUNCH)
