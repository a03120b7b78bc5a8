"""Traffic per step, held to the kernel in a grading: the suites whose verdicts score each step's
collectives and messages (the data-parallel versions, the parameter server), public and hidden
tests alike.

The edge, "how" and parameter-server traffic checks read each step's snapshot (hw2_ranks._dp_step,
run_ps), which rank code can rewrite. On gloo (and mpi) with the kernel measuring (a grading only),
each such case runs in a launch of its own (rank_runs.run_batched apart=) and its steps' snapshots,
with what the run does besides them, must add up to that launch's counters (case_suites.counted_by):
the data-parallel wrappers' broadcast of the model (DataParallel, provided: one collective per
tensor); the parameter server's constructor, rank 0's flat trainable parameters to every worker (one
message each; a header of up to PS_SLACK_BYTES may come with it). Without the kernel variable (a
student's own run) a StepSuite runs its cases in one launch per world size, as Suite does.
"""

from __future__ import annotations

from assignments.common import case_suites
from assignments.hw2.tests.hw2_checks import PS_SLACK_BYTES
from assignments.hw2.tests.hw2_harness import HW2_LAUNCH, Case, moshpit_subgroups
from assignments.hw2.tests.hw2_inputs import make_inputs
from assignments.hw2.tests.hw2_ranks import run_cases_on_rank
from assignments.hw2.tests.hw2_setup import build_model

VERSIONS = ("allreduce", "overlap", "bucketed")
STEP_COUNTED = {"all_reduce": lambda c: c.op("all_reduce").calls, "ar_bytes": lambda c: c.op("all_reduce").tensor_bytes,
                "collectives": lambda c: c.collective_calls(), "sent": lambda c: c.messages_sent,
                "bytes_sent": lambda c: c.bytes_sent, "recv": lambda c: c.messages_recv,
                "bytes_recv": lambda c: c.bytes_recv}


def besides_steps(case: Case, rank: int, p: int) -> dict:
    """What rank's run does outside its steps' snapshots (hw2_ranks.run_dp, run_ps)."""
    model = build_model(case)
    if case.kind != "ps":
        return {"collectives": len(list(model.parameters())) + len(list(model.buffers()))}
    nbytes = sum(q.nbytes for q in model.parameters() if q.requires_grad)
    return {"sent": p - 1, "bytes_sent": (p - 1) * nbytes} if rank == 0 else {"recv": 1, "bytes_recv": nbytes}


def _header_room(case: Case, rank: int, p: int) -> dict:
    if case.kind != "ps":
        return {}
    return {"sent": p - 1, "bytes_sent": (p - 1) * PS_SLACK_BYTES} if rank == 0 else \
        {"recv": 1, "bytes_recv": PS_SLACK_BYTES}


def _snapshots(case: Case, rep: dict):
    steps = rep.get("steps")
    return steps if isinstance(steps, list) else None


def per_step_traffic(case: Case, p: int) -> bool:
    return p > 1 and (case.kind in VERSIONS or case.kind == "ps")


# Every collective of these cases reduces float32 (the models' gradients and parameters): the kernel's upper
# bound on a reduction allows no widened dtype (widest=1), so an all_reduce done twice and counted once shows.
STEP_WIRE = {"check_wire": True, "apart": per_step_traffic, "widest": 1, "subgroups": moshpit_subgroups,
             "counted": case_suites.counted_by(STEP_COUNTED, _snapshots, besides=besides_steps, slack=_header_room)}
_, StepSuite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, **STEP_WIRE, **HW2_LAUNCH)
