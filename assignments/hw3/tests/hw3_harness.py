"""Homework 3 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw3/tests                 # every public test
    python -m pytest assignments/hw3/tests -m task3_1      # one task's tests

A test describes a run as a Case (hw3_setup.py: which compressor, which input, which op). The
harness runs a list of cases on p ranks in one launch, gloo by default (sim too), with the provided
collectives on. Every rank's input is made here, in the grading process, from the grading's secret
(hw3_inputs.py), and each rank receives only its own; the Outcome keeps all of them (Outcome.inputs).
Each rank compresses its own input, runs the all-reduce or the error-feedback steps, and returns
what came out and the bytes each provided collective carried (hw3_ranks.py); the verdict is taken
in the grading process (hw3_checks.py) from the kept inputs.

Files: hw3_setup.py (input families, payload sizes, the HalfGrid compressor the error-feedback test
uses), hw3_inputs.py (every rank's input, from the secret), hw3_ranks.py (rank code), this file
(launching, suites), hw3_step_traffic.py (the suites whose traffic a grading holds to the kernel, case
by case), hw3_checks.py (the verdict), assignments/common/rank_runs.py and
case_suites.py (batched launches, the stub memo, the judge; shared by every homework). They are modules of the package `assignments`, imported by full name
(assignments.hw3.tests.hw3_ranks): rank functions are pickled by reference, and a rank imports them
from the kit root. A stub's NotImplementedError is remembered per kind of case: that kind's later
cases fail at once without a launch (the signSGD quadratic needs 3.1 and 3.3, ef_topk 3.2 and 3.3).
"""

from __future__ import annotations

from assignments.common import case_suites
from assignments.hw3.tests.hw3_inputs import make_inputs
from assignments.hw3.tests.hw3_ranks import OPS, run_cases_on_rank
from assignments.hw3.tests.hw3_setup import Case

HW3_LAUNCH = {"collectives": True, "trace": False}     # the provided collectives; counters are enough
__all__ = ["Case", "Outcome", "run_cases", "Suite"]
Outcome = case_suites.Outcome


# the compressed all-reduces' and error feedback's "comm" (hw3_ranks.counts) as the run's Counters give them
COUNTED = {**{f"{op}_calls": (lambda c, op=op: c.op(op).calls) for op in OPS},
           **{f"{op}_bytes": (lambda c, op=op: c.op(op).tensor_bytes) for op in OPS},
           "p2p": lambda c: c.messages_sent, "p2p_bytes": lambda c: c.bytes_sent}
# kinds whose reports have no case-wide "comm" (per-step ones, or none): still batched, bounded by run totals
NOT_BOUND = {"lowrank_round_trip", "powersgd_ddp", "allreduce_ddp", "compress_ddp", "char_training",
             "powersgd_rank1", "orthogonalize", "ef_sign_quadratic"}


def scored_traffic(case: Case, p: int) -> bool:
    """Whether a case's "comm" (the whole case's collectives) is scored: then it runs in a launch of its own."""
    k = case.kind
    return p > 1 and k not in NOT_BOUND and not k.startswith(("boundary_", "bad_")) and not k.endswith("round_trip")


def _comm(case: Case, rep: dict):
    return [rep["comm"]] if isinstance(rep.get("comm"), dict) else None


# check_wire: every gloo run's counters are bounded by the bytes the kernel counted (observe/traffic_check.py);
# a case whose "comm" is scored runs alone, its comm equal to its run's counters
WIRE = {"check_wire": True, "apart": scored_traffic, "counted": case_suites.counted_by(COUNTED, _comm)}
run_cases, Suite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, **WIRE, **HW3_LAUNCH)
