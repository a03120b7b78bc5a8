"""Hidden tests of the bonus tasks.

5.7 interleaved 1F1B (2 chunks per rank, the 8-layer MLP split into 2p stages): run by the provided
executor at p = 2, 3, 4 (m = 3 and 4 at p = 2, 4 at p = 3 and 5 at p = 4: all but one not multiples of p), the
parameters after two steps equal the one-process model's, 2(pv-1)m messages per step; on sim with
rendezvous messages (p = 2, m = 3; p = 4, m = 5) the step takes (mv+p-1)(t_f+t_b)/v; the generator's schedules are valid for
the validator, refuse m = 2p+1 with a clear error, and replay in that time.
5.6 data parallel over pipeline replicas (p = 4: 2 stages x 2 replicas, MLP and CharTransformer): every
stage equals the one-process model trained on the whole batch, the groups are the documented ones,
and each step sends only the pipeline's messages and all-reduces each stage's gradients once.
"""

import pytest

from assignments.hw5.tests.hw5_bonus_checks import (grid_exact_problems, grid_layout_problems,
                                                    interleaved_exact_problems, interleaved_generator_problems,
                                                    interleaved_message_problems, interleaved_timing_problems)
from assignments.hw5.tests.hw5_checks import judge
from autograder.hw5.cases import GRID, INTERLEAVED, INTERLEAVED_SIM


@pytest.mark.task5_7
@pytest.mark.points(4)
def test_interleaved_generator_valid_in_time_and_refuses_odd_m():
    judge(INTERLEAVED.outcomes(2, "interleaved_generators"), interleaved_generator_problems)


@pytest.mark.task5_7
@pytest.mark.points(6)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_interleaved_matches_one_process_with_2_pv_minus_1_m_messages(p):
    judge(INTERLEAVED.outcomes(p, "interleaved"), interleaved_exact_problems, interleaved_message_problems)


@pytest.mark.bound_to("test_interleaved_matches_one_process_with_2_pv_minus_1_m_messages")
@pytest.mark.task5_7
@pytest.mark.points(3)
@pytest.mark.parametrize("p", [2, 4])
def test_interleaved_bubble_on_sim_divided_by_v(p):
    judge(INTERLEAVED_SIM.outcomes(p, "interleaved"), interleaved_timing_problems, interleaved_exact_problems,
          interleaved_message_problems)


@pytest.mark.task5_6
@pytest.mark.points(12)
def test_data_parallel_pipelines_match_one_process_with_their_groups_and_messages():
    judge(GRID.outcomes(4, "data_parallel"), grid_exact_problems, grid_layout_problems)
