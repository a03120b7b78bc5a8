"""Hidden tests, task 4.5 (bonus): SequenceParallelBlock at TP sizes 2, 3 and 4.

Rank r gets tokens [r T/p, (r+1) T/p) of the input; its output and its input's gradient equal the
dense block's on those tokens; the sharded weights' gradients equal the dense gradients' slices,
and after sync_layer_norm_grads() the layer norms' gradients equal the dense ones. How: two
all-gathers and two reduce-scatters in each pass, no all-reduce.
"""

import pytest

from assignments.hw4.tests.hw4_checks import comm_problems, judge, result_problems
from autograder.hw4.cases import COMM_WORLD_SIZES, SP


@pytest.mark.task4_5
@pytest.mark.points(5)
@pytest.mark.parametrize("p", COMM_WORLD_SIZES)
def test_sequence_parallel_block(p):
    judge(SP.outcomes(p, "sp"), result_problems, comm_problems)
