"""Homework 3 public tests: a few cases per task (the hidden tests run many more).

    python -m pytest assignments/hw3/tests                 # every task
    python -m pytest assignments/hw3/tests -m task3_1      # one task (task3_1 .. task3_6)

Your compressors run on real processes (gloo), each rank on its own float64 input (hw3_setup.py).
What each rank computed comes back here and is checked (hw3_checks.py): the round trips against
their contracts, the all-reduces against the sum of every rank's decompressed payload, the bytes
that went into the provided collectives against the payload's size, and error feedback's residuals
step by step.
"""

import pytest

from assignments.hw3.tests.hw3_boundary_checks import boundary_problems, lowrank_problems
from assignments.hw3.tests.hw3_ddp_checks import (hook_problems, orthogonalize_problems, powersgd_problems,
                                                  rank1_problems)
from assignments.hw3.tests.hw3_checks import (all_reduce_problems, bad_input_problems, comm_problems,
                                              error_feedback_problems, judge, round_trip_problems)
from assignments.hw3.tests.hw3_harness import Case
from assignments.hw3.tests.hw3_step_traffic import StepSuite


def public_cases(p: int) -> list[Case]:
    return [Case("uint8_round_trip", 37, 5), Case("uint8_round_trip", 45, 7, data="grid"),
            Case("sign_round_trip", 37, 5), Case("uint8_all_reduce", 37, 5), Case("sign_all_reduce", 29, 6, "sum"),
            Case("bad_quantize"), Case("topk_round_trip", 30, 7, data="ties"), Case("topk_all_reduce", 30, 4, data="spiky"),
            Case("randomk_all_reduce", 40, 6), Case("bad_sparsify"), Case("ef_grid", 12, data="dyadic"),
            Case("ef_topk", 20, 3, data="dyadic"), Case("powersgd_ddp", 4, 2, data="ef,warm"),
            Case("powersgd_rank1", param=1), Case("orthogonalize", 9, 3), Case("allreduce_ddp", 2),
            Case("compress_ddp", 3, 60, data="topk"), Case("boundary_exact", param=1),
            Case("boundary_topk", param=2), Case("lowrank_round_trip", 4, 2, data="exact"), Case("bad_boundary")]


# runs once per world size, every selected task; in a grading each case whose traffic is scored runs
# alone, held to its run's counters (hw3_step_traffic.py)
PUBLIC = StepSuite(public_cases)


@pytest.mark.task3_1
@pytest.mark.points(2)
def test_quantizers_round_trip():
    judge(PUBLIC.outcomes(2, ("uint8_round_trip", "sign_round_trip")), round_trip_problems)


@pytest.mark.task3_1
@pytest.mark.points(2)
def test_compressed_all_reduce_gathers_payloads():
    judge(PUBLIC.outcomes(2, ("uint8_all_reduce", "sign_all_reduce")), all_reduce_problems, comm_problems)


@pytest.mark.task3_1
@pytest.mark.points(1)
def test_quantize_bad_input():
    judge(PUBLIC.outcomes(2, "bad_quantize"), bad_input_problems)


@pytest.mark.task3_2
@pytest.mark.points(2)
def test_top_k_and_random_k():
    judge(PUBLIC.outcomes(2, "topk_round_trip"), round_trip_problems)
    judge(PUBLIC.outcomes(2, ("topk_all_reduce", "randomk_all_reduce", "bad_sparsify")),
          lambda o: bad_input_problems(o) if o.case.kind.startswith("bad") else all_reduce_problems(o) + comm_problems(o))


@pytest.mark.task3_3
@pytest.mark.points(2)
def test_error_feedback_accounting():
    judge(PUBLIC.outcomes(2, ("ef_grid", "ef_topk")), error_feedback_problems, comm_problems)


@pytest.mark.task3_4
@pytest.mark.points(2)
@pytest.mark.time_limit(180)
def test_powersgd_against_torch():
    judge(PUBLIC.outcomes(2, "orthogonalize"), orthogonalize_problems)
    judge(PUBLIC.outcomes(2, "powersgd_rank1"), rank1_problems)
    judge(PUBLIC.outcomes(2, "powersgd_ddp"), powersgd_problems)


@pytest.mark.task3_5
@pytest.mark.points(2)
@pytest.mark.time_limit(120)
def test_hooked_ddp():
    judge(PUBLIC.outcomes(2, ("allreduce_ddp", "compress_ddp")), hook_problems)


@pytest.mark.task3_6
@pytest.mark.points(1)
def test_compressed_stage_boundary():
    judge(PUBLIC.outcomes(2, "lowrank_round_trip"), lowrank_problems)
    judge(PUBLIC.outcomes(2, ("boundary_exact", "boundary_topk", "bad_boundary")),
          lambda o: bad_input_problems(o) if o.case.kind.startswith("bad") else boundary_problems(o))
