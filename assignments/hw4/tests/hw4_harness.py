"""Homework 4 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw4/tests                 # every public test
    python -m pytest assignments/hw4/tests -m task4_3      # one task's tests

A test describes a run as a Case (hw4_setup.py: which piece). The harness runs a list of cases on
p ranks (the tensor-parallel group) in one launch, gloo by default (sim and mpi too), with the
provided collectives on. The dense model, the inputs and the loss weights are drawn here, in the
grading process, from the grading's secret (hw4_inputs.py); each rank is sent only its shard of the
piece's weights and its view of the input and loss weight. Each rank builds its piece from that
dense model, runs it forward and backward, and returns its output, its input's and parameters'
gradients and what it communicated in each pass (hw4_ranks.py); the verdict is taken in the grading
process (hw4_checks.py) against the dense model.

Files: hw4_setup.py (configs, dense model, inputs, the dense reference), hw4_inputs.py (what each
rank holds, from the secret), hw4_ranks.py (rank code),
this file (launching, suites), hw4_checks.py (the verdict), assignments/common/rank_runs.py and
case_suites.py (batched launches, the stub memo, the judge; shared by every homework). They are
modules of the package `assignments`, imported by full name (assignments.hw4.tests.hw4_ranks): rank
functions are pickled by reference, and a rank imports them from the kit root. A case that raises on
a rank stops the launch; that case records the error and the others run again. A stub's
NotImplementedError is remembered per kind of piece: that kind's later cases fail at once without a
launch (per kind, not per task: the model case is task 4.4 but fails on a 4.3 stub, and a task may
mix stubs and finished pieces).
"""

from __future__ import annotations

from assignments.common import case_suites
from assignments.hw4.tests.hw4_inputs import make_inputs
from assignments.hw4.tests.hw4_ranks import OPS, run_cases_on_rank
from assignments.hw4.tests.hw4_setup import Case

HW4_LAUNCH = {"collectives": True, "trace": False}     # the provided collectives; counters are enough
__all__ = ["Case", "Outcome", "run_cases", "Suite"]
Outcome = case_suites.Outcome


# each pass's counts ("fwd", "bwd": hw4_ranks.counts) as the run's Counters give them
COUNTED = {**{op: (lambda c, op=op: c.op(op).calls) for op in OPS},
           "ar_bytes": lambda c: c.op("all_reduce").tensor_bytes, "p2p": lambda c: c.messages_sent,
           "barrier": lambda c: c.op("barrier").calls}


def scored_traffic(case: Case, p: int) -> bool:
    """Whether a case's collectives are scored (comm_problems): then it runs in a launch of its own."""
    return p > 1 and not case.kind.startswith("bad_")


def _passes(case: Case, rep: dict):
    return [rep["fwd"], rep["bwd"]] if "fwd" in rep and "bwd" in rep else None


def _loose(case: Case) -> set:
    """sp also all-reduces its layer norms' gradients after the backward pass (unscored)."""
    return {"all_reduce", "ar_bytes"} if case.kind == "sp" else set()


# check_wire: every gloo run's counters are bounded by the bytes the kernel counted (observe/traffic_check.py);
# a case whose collectives are scored runs alone, its two passes' counts adding up to its run's counters
WIRE = {"check_wire": True, "apart": scored_traffic, "counted": case_suites.counted_by(COUNTED, _passes, _loose)}
run_cases, Suite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, **WIRE, **HW4_LAUNCH)
