"""Hidden tests, task 3.6 (bonus): a compressed stage boundary of the CharTransformer split in two.

One step of two_stage_step (provided) on 2 gloo ranks through the student's CompressedBoundary, a
float64 model with 3 blocks cut at each boundary 0 to 3 (hw3_boundary.py). With Identity both stages'
gradients equal the unsplit model's (1e-10). With TopK(40) forward and TopK(25) backward,
Uint8Quantizer(20) forward (chunks of 20 in 252 elements) and TopK(30) backward, LowRank(2, seed 3) forward and LowRank(3, seed 8)
backward: what rank 1 received is the forward round trip of rank 0's activation, the gradient rank 0
applied is the backward round trip of the gradient rank 1 took at what it received (so a boundary
that sends either direction dense, or uses one compressor for both, fails), each stage's gradients
are those of what it got; rank 0 sent exactly the forward payload's bytes and rank 1 the backward
payload's, one message per tensor. LowRank against its definition (P from M Q0, Q0 drawn from the
seed) and on matrices of rank r (exact). Bad arguments raise ValueError.
"""

import pytest
import torch

from assignments.hw3.tests.hw3_boundary_checks import boundary_problems, lowrank_problems
from assignments.hw3.tests.hw3_checks import bad_input_problems, judge
from autograder.hw3.cases import BOUNDARY_BAD, BOUNDARY_EXACT, BOUNDARY_LINKS, LOWRANK


def lowrank_reference(m: torch.Tensor, r: int, seed: int) -> torch.Tensor:
    """P P^T M with P an orthonormal basis of span(M Q0), Q0 (cols, r) from the seed: LowRank's round trip."""
    q0 = torch.randn(m.shape[1], r, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    basis = torch.linalg.qr(m.to(torch.float64) @ q0).Q
    return basis @ (basis.t() @ m.to(torch.float64))


@pytest.mark.task3_6
@pytest.mark.points(1)
def test_identity_boundary_is_exact():
    judge(BOUNDARY_EXACT.outcomes(2, "boundary_exact"), boundary_problems)


@pytest.mark.task3_6
@pytest.mark.points(2)
def test_compressed_boundary_both_directions():
    judge(BOUNDARY_LINKS.outcomes(2, ("boundary_topk", "boundary_uint8", "boundary_lowrank")),
          lambda o: boundary_problems(o, lowrank_reference))


@pytest.mark.task3_6
@pytest.mark.points(1)
def test_lowrank_round_trip():
    judge(LOWRANK.outcomes(1, "lowrank_round_trip"), lambda o: lowrank_problems(o, lowrank_reference))


@pytest.mark.task3_6
@pytest.mark.points(1)
def test_boundary_bad_input():
    judge(BOUNDARY_BAD.outcomes(2, "bad_boundary"), bad_input_problems)
