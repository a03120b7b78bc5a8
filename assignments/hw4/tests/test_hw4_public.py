"""Homework 4 public tests: a few cases per task (the hidden tests run many more).

    python -m pytest assignments/hw4/tests                 # every task
    python -m pytest assignments/hw4/tests -m task4_3      # one task (task4_1 .. task4_5)

Your pieces run on real processes (gloo) as one tensor-parallel group, built from the same dense
float64 model (hw4_setup.py). What each rank computed comes back here and is compared with the
dense model (hw4_checks.py): outputs, the input's gradient, and every parameter's gradient against
the matching slice of the dense gradient (tolerance 1e-10), plus the exact number of all-reduces
(all-gathers, reduce-scatters) in the forward and in the backward pass.
"""

import pytest

from assignments.hw4.tests.hw4_checks import comm_problems, judge, memory_problems, result_problems
from assignments.hw4.tests.hw4_harness import Case, Suite
from assignments.hw4.tests.hw4_setup import BLOCK_KINDS, COMM_KINDS, LINEAR_KINDS


def public_cases(p: int) -> list[Case]:
    """p = 2: one case of every piece; p = 3: the block (3 does not divide config A's 4 heads: config B)."""
    if p == 3:
        return [Case("block")]
    return [Case(k) for k in COMM_KINDS + LINEAR_KINDS + BLOCK_KINDS + ("embedding", "xent", "model", "sp")]


PUBLIC = Suite(public_cases)                  # runs once per world size, every selected task


@pytest.mark.task4_1
@pytest.mark.points(2)
def test_comm_ops():
    judge(PUBLIC.outcomes(2, COMM_KINDS), result_problems, comm_problems)


@pytest.mark.task4_2
@pytest.mark.points(2)
def test_column_and_row_parallel_linear():
    judge(PUBLIC.outcomes(2, LINEAR_KINDS), result_problems, comm_problems, memory_problems)


@pytest.mark.task4_3
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [2, 3])
def test_parallel_mlp_attention_block(p):
    judge(PUBLIC.outcomes(p, BLOCK_KINDS), result_problems, comm_problems, memory_problems)


@pytest.mark.task4_4
@pytest.mark.points(2)
def test_vocab_parallel_embedding_cross_entropy_and_model_loss():
    judge(PUBLIC.outcomes(2, ("embedding", "xent", "model")), result_problems, comm_problems)


@pytest.mark.task4_5
@pytest.mark.points(1)
def test_sequence_parallel_block():
    judge(PUBLIC.outcomes(2, "sp"), result_problems, comm_problems)
