"""Traffic per step, held to the kernel in a grading: the suites whose verdicts score each step's
collectives (ZeRO, FSDP, HSDP), public and hidden tests alike.

Each step's collectives are scored from the steps' snapshots (hw6_ranks.run_training), which rank
code can rewrite. On gloo (and mpi) with the kernel measuring (a grading only), each ZeRO, FSDP and
HSDP case runs in a launch of its own (rank_runs.run_batched apart=) and its steps' snapshots, with
what the run does besides them, must add up to that launch's counters (case_suites.counted_by): at
construction the whole model from rank 0 (broadcasts: the harness's or the provided constructor's,
and the piece's own, whose calls and padding are the student's choice; HSDP's over the world, then
FSDP's over the shard group), after the steps the harness's all-gather of every FSDP unit's shard (and
full_parameters()'s, in the mixed-precision cases). HSDP's verdict also holds each step's trace to
its snapshot (hw6_hybrid_checks.py). Without the kernel variable (a student's own run) a StepSuite
runs its cases in one launch per world size, as Suite does.
"""

from __future__ import annotations

from assignments.common import case_suites
from assignments.hw6.tests import hw6_hybrid_groups as hybrid
from assignments.hw6.tests.hw6_harness import HW6_LAUNCH, HW6_WIRE, Case
from assignments.hw6.tests.hw6_inputs import make_inputs
from assignments.hw6.tests.hw6_ranks import OPS, run_cases_on_rank
from assignments.hw6.tests.hw6_setup import build_model, unit_sizes
from minitorch_dist.sharded.flat import padded_numel

STEP_COUNTED = {**{f"{op}_{i}": (lambda c, op=op, i=i: (c.op(op).calls, c.op(op).tensor_bytes)[i])
                   for op in OPS for i in (0, 1)},
                "p2p_0": lambda c: c.messages_sent, "p2p_1": lambda c: c.bytes_sent}
BOUND_STAGES = ("zero1", "zero2", "fsdp", "hsdp")


def besides_steps(case: Case, rank: int, p: int) -> dict:
    """What a rank's run does outside its steps' snapshots: the model's broadcast (one call at least) and,
    under FSDP, the gathers of the units' shards; HSDP's (hw6_hybrid_groups.besides_steps)."""
    if case.stage == "hsdp":
        return {f"{op}_{i}": v[i] for op, v in hybrid.besides_steps(case, p).items() for i in (0, 1)}
    _, whole = hybrid.model_bytes(case)
    out = {"broadcast_0": 1, "broadcast_1": whole}
    if case.stage == "fsdp":
        gathers = 2 if case.mixed else 1
        out["all_gather_0"] = gathers * len(unit_sizes(case))
        out["all_gather_1"] = gathers * sum(padded_numel(n, p) // p for n in unit_sizes(case)) * hybrid.itemsize(case)
    return out


def _padding(case: Case, rank: int, p: int) -> dict:
    """The broadcasts may carry the flat shards' padding (under p elements a unit or bucket)."""
    pieces = len(unit_sizes(case)) if case.stage in ("fsdp", "hsdp") else len(list(build_model(case).parameters()))
    return {"broadcast_1": pieces * p * hybrid.itemsize(case)}


def _snapshots(case: Case, rep: dict):
    steps = rep.get("steps")
    if not isinstance(steps, list):
        return None
    return [{f"{op}_{i}": v[i] for op, v in s["comm"].items() for i in (0, 1)} for s in steps]


def per_step_traffic(case: Case, p: int) -> bool:
    return p > 1 and case.stage in BOUND_STAGES


_, StepSuite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, apart=per_step_traffic,
                                counted=case_suites.counted_by(STEP_COUNTED, _snapshots, lambda case: ("broadcast_0",),
                                                               besides=besides_steps, slack=_padding),
                                **HW6_WIRE, **HW6_LAUNCH)
