"""Homework 6 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw6/tests                 # every public test
    python -m pytest assignments/hw6/tests -m task6_3      # one task's tests

A test describes a training run as a Case (hw6_setup.py: stage, optimizer, model, FSDP options).
The harness runs a list of cases on p ranks in one launch, gloo by default (sim and mpi too), with
the provided collectives on and the trace on (prefetch shows as overlap in it). The batches (and
the weights of ranks that start apart) are drawn here, in the grading process, from the grading's
secret (hw6_inputs.py); each rank receives only its rows and its own weights. Each rank trains the
case's model with its piece and returns the parameters, the collectives of every step, the memory
tracker's figures and the times around each block (hw6_ranks.py); the verdict is taken in the
grading process (hw6_checks.py) against a single-process run on the same batches and closed forms.

Files: hw6_setup.py (model, data, optimizers, the reference run), hw6_inputs.py (what each rank
trains on, from the secret), hw6_ranks.py (rank code), this file, hw6_step_traffic.py (the suites whose steps' traffic a
grading holds to the kernel), hw6_checks.py (the verdict),
assignments/common (batched launches, the stub memo, the judge).
"""

from __future__ import annotations

import torch._dynamo  # noqa: F401  (a torch optimizer's constructor imports it: once here, not in every rank)

from assignments.common import case_suites
from assignments.hw6.tests.hw6_hybrid_groups import lone_most, subgroups
from assignments.hw6.tests.hw6_inputs import make_inputs
from assignments.hw6.tests.hw6_ranks import run_cases_on_rank
from assignments.hw6.tests.hw6_setup import Case

HW6_LAUNCH = {"collectives": True, "trace": True}
__all__ = ["Case", "Outcome", "run_cases", "Suite", "HW6_WIRE"]
Outcome = case_suites.Outcome


# check_wire: every gloo and mpi run's counters are bounded by the bytes the kernel counted (observe/traffic_check.py);
# what the trace puts on one-rank groups is exempt from the lower bound only up to what a correct run does
# there (HSDP at shard_size 1 or p: hw6_hybrid_groups.lone_most), known here, not from the trace; what
# a rank receives from the job's store, only its HSDP groups' rendezvous (hw6_hybrid_groups.subgroups)
HW6_WIRE = {"check_wire": True, "lone": lone_most, "subgroups": subgroups}
run_cases, Suite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, **HW6_WIRE, **HW6_LAUNCH)
