"""Hidden checks that compare a run with a fixed number must hold for the reference on every draw of
the grading's input secret (assignments/common/rank_inputs.py): the inputs change with each grading.

homework 2's SGP training test wanted every rank's loss below 0.7 after 60 steps. Over 800 draws
the SGP formula itself (what the reference computes, to 1e-15) ended its worst rank at 0.42-0.98,
above 0.7 in 4% of them: a correct submission lost the test and its task's entry (10 of 138 points
in a CI run). The bound now rises to the formula's own worst loss plus a slack where that is higher.
"""

import os
import secrets

import pytest

from assignments.common import rank_inputs
from assignments.common.case_suites import Outcome
from assignments.hw2.tests.hw2_gossip_checks import decentralized_reference
from autograder.hw2.cases import SGP_TARGET_LOSS, SGP_TRAIN
from autograder.hw2.test_gossip import sgp_training_problems

ABOVE = "sgp-draw-25"          # a draw whose formula ends its worst rank at 0.84


def _formula_outcome(step: int = -1) -> Outcome:
    """The outcome of a run that computed the SGP formula exactly (its parameters after `step`)."""
    case = SGP_TRAIN.make_cases(4)[0]
    flats = decentralized_reference(case, 4)[0][step]
    return Outcome(case, 4, "gloo", [{"flats": [flat], "w": 1.0} for flat in flats])


def test_the_sgp_check_holds_for_the_formula_where_it_ends_above_the_fixed_target(monkeypatch):
    monkeypatch.setenv(rank_inputs.SECRET_VAR, ABOVE)
    assert sgp_training_problems(_formula_outcome()) == []
    problems = sgp_training_problems(_formula_outcome(step=5))       # trained 5 steps of 60: still fails
    assert len(problems) == 1 and "must be below" in problems[0] and "reaches 0.83" in problems[0], problems


@pytest.mark.parametrize("draw", range(10))
def test_the_sgp_check_holds_for_the_formula_on_random_draws(monkeypatch, draw):
    monkeypatch.setenv(rank_inputs.SECRET_VAR, secrets.token_hex(16))
    assert sgp_training_problems(_formula_outcome()) == [], os.environ[rank_inputs.SECRET_VAR]
    assert SGP_TARGET_LOSS == 0.7
