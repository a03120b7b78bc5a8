"""Hidden tests, task 2.7 (bonus): Moshpit grid averaging with side 2. p = 4 and 8 (8 on sim):
every rank holds the exact mean after log2 p rounds; p = 6 is not a grid: every rank raises a
ValueError naming p."""

import pytest

from assignments.hw2.tests.hw2_checks import judge
from assignments.hw2.tests.hw2_gossip_checks import moshpit_problems
from autograder.hw2.cases import MOSHPIT, MOSHPIT_SIM


@pytest.mark.task2_7
@pytest.mark.points(3)
@pytest.mark.parametrize("p", [4, 8, 6])
def test_moshpit_average(p):
    judge((MOSHPIT_SIM if p == 8 else MOSHPIT).outcomes(p, "moshpit"), moshpit_problems)
