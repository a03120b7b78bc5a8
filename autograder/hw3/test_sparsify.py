"""Hidden tests, task 3.2: TopK and RandomK.

TopK round trips (p 1 and 2): the k largest |x| with ties to the lower index (inputs: multiples of
0.5 of both signs), k = 0 and k = n, values near 1e6; payload k float64 values and k int32 indices.
All-reduces at p 1-4: TopK the sum/mean of every rank's top-k scattered (spikes at the same positions
on every rank: coinciding indices add, never overwrite), by
all-gather of k (8 + 4) bytes and no all-reduce; RandomK over 3 steps: every rank the same k distinct
indices, different from the step before, the sum/mean of the ranks' values there, one all-reduce of
k * 8 bytes per step and no all-gather. Bad input: k < 0, k > n raise ValueError.
"""

import pytest

from assignments.hw3.tests.hw3_checks import (all_reduce_problems, bad_input_problems, comm_problems, judge,
                                              round_trip_problems)
from autograder.hw3.cases import BAD_INPUT, BAD_WORLD_SIZE, COMM_WORLD_SIZES, ROUND_TRIP, ROUND_TRIP_WORLD_SIZES, SPARSE, WORLD_SIZES


@pytest.mark.task3_2
@pytest.mark.points(4)
@pytest.mark.parametrize("p", ROUND_TRIP_WORLD_SIZES)
def test_top_k_round_trip_with_ties(p):
    judge(ROUND_TRIP.outcomes(p, "topk_round_trip"), round_trip_problems)


@pytest.mark.task3_2
@pytest.mark.points(5)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_top_k_all_reduce(p):
    judge(SPARSE.outcomes(p, "topk_all_reduce"), all_reduce_problems)


@pytest.mark.task3_2
@pytest.mark.points(5)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_random_k_same_indices_on_every_rank_new_each_step(p):
    judge(SPARSE.outcomes(p, "randomk_all_reduce"), all_reduce_problems)


@pytest.mark.task3_2
@pytest.mark.points(4)
@pytest.mark.parametrize("p", COMM_WORLD_SIZES)
def test_sparse_all_reduces_send_only_the_payload(p):
    judge(SPARSE.outcomes(p, ("topk_all_reduce", "randomk_all_reduce")), all_reduce_problems, comm_problems)


@pytest.mark.task3_2
@pytest.mark.points(2)
def test_sparsify_bad_k_raises_value_error():
    judge(BAD_INPUT.outcomes(BAD_WORLD_SIZE, "bad_sparsify"), bad_input_problems)
