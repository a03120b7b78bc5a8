"""Homework 2 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw2/tests                 # every public test
    python -m pytest assignments/hw2/tests -m task2_4      # one task's tests

A test describes a run as a Case (hw2_setup.py: which piece, model, optimizer, steps, edge case).
The harness runs a list of cases on p ranks in one launch (gloo by default; sim and mpi too), with
the provided collectives on and the trace recorded, because homework 2 is graded on *how* it
communicates as well as on what it computes. What each rank trains on or averages is made here,
in the grading process, from the grading's secret (hw2_inputs.py), and each rank receives only its
own; the Outcome keeps all of them (Outcome.inputs). Each rank returns, per case, its parameters or
values and what it did (hw2_ranks.py); the verdict is taken in the grading process (hw2_checks.py)
against a single-process reference or a closed form computed from those inputs.

Files: hw2_setup.py (cases, models, data, the reference run), hw2_inputs.py (every rank's input,
from the secret), hw2_ranks.py (rank code), this file
(launching, suites), hw2_step_traffic.py (the suites whose steps' traffic a grading holds to the kernel),
hw2_checks.py (the verdict), assignments/common/rank_runs.py and case_suites.py
(batched launches, the stub memo, the judge; shared with homework 1). They are modules of the
package `assignments`, imported by full name (assignments.hw2.tests.hw2_ranks): rank functions are
pickled by reference, and a rank imports them from the kit root. A case that raises on a rank
stops the launch; that case records the error and the others run again. A stub's
NotImplementedError is remembered per kind (ring_gossip, dpsgd, ...): that kind's later cases fail
at once without a launch (per kind, not per task: a task may have a stub and a finished function).
"""

from __future__ import annotations

from assignments.common import case_suites, rank_runs
from assignments.hw2.tests.hw2_inputs import make_inputs
from assignments.hw2.tests.hw2_ranks import (rank_bucketed_rank_dies,  # noqa: F401 (the tests import them here)
                                             run_cases_on_rank)
from assignments.hw2.tests.hw2_setup import Case
from minitorch_dist import SimNetwork

HW2_LAUNCH = {"collectives": True, "trace": True}      # the provided collectives; events for "how"
__all__ = ["Case", "Outcome", "run_cases", "Suite", "try_launch", "rank_bucketed_rank_dies"]
Outcome = case_suites.Outcome


def try_launch(fn, p: int, args=(), backend: str = "gloo", network: SimNetwork | None = None):
    """(RunResult, None), or (None, the RankError) when a rank raised: judge it outside the except."""
    return rank_runs.try_launch(fn, p, args, backend, network, **HW2_LAUNCH)


def moshpit_subgroups(case: Case, p: int) -> list[list[int]]:
    """Per rank the sizes of the sub-groups a correct run of the case creates (run_batched's
    `subgroups`: their rendezvous is what a rank may receive from the job's store): moshpit's rounds
    (side 2), one group of 2 per round, log2 p rounds where p is a power of 2 (else it raises first)."""
    rounds = p.bit_length() - 1
    if case.kind != "moshpit" or p < 2 or p != 1 << rounds:
        return [[] for _ in range(p)]
    return [[2] * rounds for _ in range(p)]


# check_wire: every gloo and mpi run's counters are bounded by the bytes the kernel counted (observe/traffic_check.py)
run_cases, Suite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, check_wire=True,
                                    subgroups=moshpit_subgroups, **HW2_LAUNCH)
