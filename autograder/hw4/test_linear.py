"""Hidden tests, task 4.2: ColumnParallelLinear and RowParallelLinear built from a dense nn.Linear,
TP sizes 1-4 (1: the size-1 bypass).

Column (the MLP's fc; with gather_output; the fused q, k, v projection with parts=3): rank r's
output is its slice of the dense output (of q, k and v), or the whole output when gathered.
Row (fc_proj; input already split, or split here): the whole dense output on every rank, the bias
added once. The input's gradient and every weight's and bias's gradient equal the matching slice
of the dense layer's. How: column, an all-reduce backward only (plus an all-gather forward when
gathering); row, an all-reduce forward only (plus an all-gather backward when it splits the
input); nothing at TP size 1. Memory: 1/p of the weight per rank; a row layer's bias replicated.
"""

import pytest

from assignments.hw4.tests.hw4_checks import comm_problems, judge, memory_problems, result_problems
from assignments.hw4.tests.hw4_setup import LINEAR_KINDS
from autograder.hw4.cases import LINEAR, WORLD_SIZES


@pytest.mark.task4_2
@pytest.mark.points(10)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_linear_layers_match_dense(p):
    judge(LINEAR.outcomes(p, LINEAR_KINDS), result_problems)


@pytest.mark.task4_2
@pytest.mark.points(5)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_linear_layers_communication_and_memory(p):
    judge(LINEAR.outcomes(p, LINEAR_KINDS), comm_problems, memory_problems)
