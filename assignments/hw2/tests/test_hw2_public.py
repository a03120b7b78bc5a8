"""Homework 2 public tests: a few cases per task (the hidden tests run many more).

    python -m pytest assignments/hw2/tests                 # every task
    python -m pytest assignments/hw2/tests -m task2_4      # one task (task2_1 .. task2_7)

Your classes run on real processes (gloo) with the provided collectives; what each rank computed
comes back here. Training runs are compared with a single-process run on the whole global batch
(float64, tolerance 1e-12; replicas bitwise equal); how you communicated is read from the
counters and the trace (hw2_checks.py); gossip values are checked exactly (hw2_gossip_checks.py).
"""

import pytest

from assignments.hw2.tests.hw2_checks import how_problems, judge, ps_traffic_problems, training_problems
from assignments.hw2.tests.hw2_gossip_checks import (decentralized_problems, exact_mean_problems, moshpit_problems,
                                                     push_sum_problems, ring_gossip_problems)
from assignments.hw2.tests.hw2_harness import Case
from assignments.hw2.tests.hw2_step_traffic import StepSuite

VERSIONS = {"allreduce": "task2_2", "overlap": "task2_3", "bucketed": "task2_4"}


def public_cases(p: int) -> list[Case]:
    """p = 2: the cases that need a power of two; p = 3: everything else."""
    if p == 2:
        return [Case("push_sum", steps=1, tag="mean"), Case("moshpit")]
    cases = [Case("ps", "mlp", "sgd"), Case("ps", "mlp", "adamw", edge="frozen", steps=2)]
    for kind in VERSIONS:
        cases += [Case(kind, "mlp", "adamw"), Case(kind, "transformer", "sgd", steps=2),
                  Case(kind, "deep", "sgd", steps=2, bucket_kb=300)]
    return cases + [Case("ring_gossip"), Case("dpsgd", "mlp", batch=16, steps=2, lr=0.2),
                    Case("push_sum", steps=2, seed=2, tag="step"), Case("sgp", "mlp", batch=16, steps=2, lr=0.2)]


# runs once per world size, every selected task; in a grading each case whose steps' traffic is scored
# runs alone, held to its run's counters (hw2_step_traffic.py)
PUBLIC = StepSuite(public_cases)
VERSION_PARAMS = [pytest.param(v, marks=getattr(pytest.mark, t), id=v) for v, t in VERSIONS.items()]


@pytest.mark.task2_1
@pytest.mark.points(2)
def test_parameter_server():
    judge(PUBLIC.outcomes(3, "ps"), training_problems, ps_traffic_problems)


@pytest.mark.points(3)
@pytest.mark.parametrize("version", VERSION_PARAMS)
def test_ddp_matches_single_process_and_overlaps(version):
    judge(PUBLIC.outcomes(3, version), training_problems, how_problems)


@pytest.mark.task2_5
@pytest.mark.points(2)
def test_ring_gossip_and_dpsgd():
    judge(PUBLIC.outcomes(3, "ring_gossip"), ring_gossip_problems)
    judge(PUBLIC.outcomes(3, "dpsgd"), decentralized_problems)


@pytest.mark.task2_6
@pytest.mark.points(2)
def test_push_sum_and_sgp():
    judge(PUBLIC.outcomes(3, "push_sum", "step"), push_sum_problems)
    judge(PUBLIC.outcomes(2, "push_sum", "mean"), push_sum_problems, exact_mean_problems)
    judge(PUBLIC.outcomes(3, "sgp"), decentralized_problems)


@pytest.mark.task2_7
@pytest.mark.points(1)
def test_moshpit_average():
    judge(PUBLIC.outcomes(2, "moshpit"), moshpit_problems)
