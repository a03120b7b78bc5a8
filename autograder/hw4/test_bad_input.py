"""Hidden tests, tasks 4.2-4.4: a size the TP group does not divide fails at construction.

At TP sizes 3 and 4, on every rank: after the valid piece has run, building ColumnParallelLinear
of 50 output features, RowParallelLinear of 50 input features, ParallelMLP of hidden size 50, a
ParallelBlock whose heads (4 at TP 3, 6 at TP 4) do not divide, or a ParallelCharTransformer of
vocabulary 50 raises ValueError in the constructor, and its message names the quantity and its size.
"""

import pytest

from assignments.hw4.tests.hw4_checks import bad_input_problems, judge
from assignments.hw4.tests.hw4_setup import BAD_KINDS, TASK_OF
from autograder.hw4.cases import BAD, BAD_WORLD_SIZES


@pytest.mark.points(7)
@pytest.mark.parametrize("kind", [pytest.param(k, marks=getattr(pytest.mark, TASK_OF[k]), id=k) for k in BAD_KINDS])
def test_bad_input_raises_at_construction(kind):
    judge([o for p in BAD_WORLD_SIZES for o in BAD.outcomes(p, kind)], bad_input_problems)
