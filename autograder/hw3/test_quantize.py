"""Hidden tests, task 3.1: Uint8Quantizer, SignQuantizer and compressed_all_reduce.

Round trips (p 1 and 2, each rank its own input): uint8 within scale/2 of every element (scale =
(max - min)/255 of the element's chunk; chunks of 5 of 37 elements, of 8 of 23 values near 1e6, of 16
of 5 elements), grid values, constant chunks and zeros exactly, an empty tensor; sign +-mean|x| per
chunk, + for x >= 0 (n not a multiple of 8, chunk = n, empty); payloads of n + 8 ceil(n/c) and
ceil(n/8) + 4 ceil(n/c) bytes. All-reduce at p 1-4 ("avg" and "sum"): the same result on every rank,
equal to the sum or mean of every rank's decompressed payload (grid inputs: the exact mean), and
the bytes that went into all_gather exactly the payload's, no all-reduce. Bad input: non-finite x,
op 'max', chunk 0 or negative raise ValueError.
"""

import pytest

from assignments.hw3.tests.hw3_checks import (all_reduce_problems, bad_input_problems, comm_problems, judge,
                                              round_trip_problems)
from autograder.hw3.cases import (BAD_INPUT, BAD_WORLD_SIZE, COMM_WORLD_SIZES, QUANT, ROUND_TRIP,
                                  ROUND_TRIP_WORLD_SIZES, WORLD_SIZES)


@pytest.mark.task3_1
@pytest.mark.points(6)
@pytest.mark.parametrize("p", ROUND_TRIP_WORLD_SIZES)
def test_uint8_round_trip(p):
    judge(ROUND_TRIP.outcomes(p, "uint8_round_trip"), round_trip_problems)


@pytest.mark.task3_1
@pytest.mark.points(4)
@pytest.mark.parametrize("p", ROUND_TRIP_WORLD_SIZES)
def test_sign_round_trip(p):
    judge(ROUND_TRIP.outcomes(p, "sign_round_trip"), round_trip_problems)


@pytest.mark.task3_1
@pytest.mark.points(6)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_compressed_all_reduce_is_the_sum_of_decompressed_payloads(p):
    judge(QUANT.outcomes(p, ("uint8_all_reduce", "sign_all_reduce")), all_reduce_problems)


@pytest.mark.task3_1
@pytest.mark.points(4)
@pytest.mark.parametrize("p", COMM_WORLD_SIZES)
def test_compressed_all_reduce_sends_only_the_payload(p):
    judge(QUANT.outcomes(p, ("uint8_all_reduce", "sign_all_reduce")), all_reduce_problems, comm_problems)


@pytest.mark.task3_1
@pytest.mark.points(2)
def test_quantize_bad_input_raises_value_error():
    judge(BAD_INPUT.outcomes(BAD_WORLD_SIZE, "bad_quantize"), bad_input_problems)
