"""Homework 5 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw5/tests                 # every public test
    python -m pytest assignments/hw5/tests -m task5_2      # one task's tests

A test describes a run as a Case (hw5_setup.py: which schedule, which model, m). The harness runs
a list of cases on p ranks (stage j on rank j) in one launch, gloo by default (sim and mpi too),
traced, without the provided collectives (a pipeline only sends and receives). The batch is drawn
here, in the grading process, from the grading's secret (hw5_inputs.py): the first stage's rank is
sent the inputs, the last stage's the targets. Each rank trains its stage STEPS steps and reports its
parameters, losses, messages, the first step's trace, the bytes autograd saved and step times
(hw5_ranks.py); the verdict is taken in the grading process (hw5_checks.py) against the whole model
trained on the whole batch in one process.

Files: hw5_setup.py (models, data, cases, reference), hw5_inputs.py (what each rank holds, from the
secret), hw5_memory.py (saved-tensor hooks),
hw5_ranks.py (rank code), this file (launching, suites), hw5_checks.py (the verdict),
hw5_bonus_ranks.py / hw5_bonus_checks.py (bonus 5.6 and 5.7), hw5_vocab_ranks.py / hw5_vocab_checks.py
(bonus 5.8, run like 5.6 with the provided collectives on), and
assignments/common/rank_runs.py and case_suites.py (shared by every homework).
"""

from __future__ import annotations

from assignments.common import case_suites
from assignments.hw5.tests.hw5_bonus_ranks import GRID_STAGES
from assignments.hw5.tests.hw5_inputs import make_inputs
from assignments.hw5.tests.hw5_ranks import run_cases_on_rank
from assignments.hw5.tests.hw5_setup import Case

HW5_LAUNCH = {"collectives": False, "trace": True}
HW5_GRID_LAUNCH = {"collectives": True, "trace": True}     # 5.6 and 5.8 use all_reduce (5.8 broadcast too)
__all__ = ["Case", "Outcome", "run_cases", "Suite", "GridSuite"]
Outcome = case_suites.Outcome


UNSCORED_TRAFFIC = {"generators", "interleaved_generators", "deadlock", "bad_batch", "bad_batch_1f1b"}
# the counters each case's "counts" holds, as the run's Counters give them
COUNTED = {"sent": lambda c: c.messages_sent, "recv": lambda c: c.messages_recv, "bytes_sent": lambda c: c.bytes_sent,
           "bytes_recv": lambda c: c.bytes_recv, "all_reduce_bytes": lambda c: c.op("all_reduce").tensor_bytes,
           "broadcast_bytes": lambda c: c.op("broadcast").tensor_bytes}


def scored_traffic(case: Case, p: int) -> bool:
    """Whether a case's messages are scored (its "counts"): then it runs in a launch of its own."""
    return p > 1 and case.kind not in UNSCORED_TRAFFIC


# check_wire: every gloo run's counters are bounded by the bytes the kernel counted (observe/traffic_check.py);
# a case whose messages are scored runs alone, its counts held to its run's counters (rank_runs.run_batched)
counted_problems = case_suites.counted_by(COUNTED, lambda case, rep: [rep["counts"]] if "counts" in rep else None)
WIRE = {"check_wire": True, "apart": scored_traffic, "counted": counted_problems}


def grid_subgroups(case: Case, p: int) -> list[list[int]]:
    """Per rank the sizes of the sub-groups a correct run of the case creates (run_batched's
    `subgroups`: their rendezvous is what a rank may receive from the job's store): 5.6's pipeline_grid,
    a pipeline of GRID_STAGES ranks and a data group of p / GRID_STAGES replicas."""
    if case.kind != "data_parallel" or p % GRID_STAGES:
        return [[] for _ in range(p)]
    return [[GRID_STAGES, p // GRID_STAGES] for _ in range(p)]


run_cases, Suite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, **WIRE, **HW5_LAUNCH)
_, GridSuite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, **WIRE, subgroups=grid_subgroups,
                                **HW5_GRID_LAUNCH)
