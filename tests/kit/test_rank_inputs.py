"""assignments/common/rank_inputs.py and homework 1's inputs (hw1_inputs.py): made from a secret that
the grader draws per grading, reproducible without it, exact where the checks need them exact.
No processes: the harness's grading use is in test_hostile_inputs.py and the graded suites."""

import pytest
import torch

from assignments.common import rank_inputs
from assignments.hw1.tests.hw1_inputs import EXACT_INTEGERS, constants, make_inputs
from assignments.hw1.tests.hw1_ranks import DTYPES, Case
from autograder.jobs import INPUT_SECRET, draw_input_secret


@pytest.fixture
def no_secret(monkeypatch):
    monkeypatch.delenv(rank_inputs.SECRET_VAR, raising=False)
    monkeypatch.delenv(rank_inputs.SECRET_FILE_VAR, raising=False)
    return monkeypatch


def test_without_a_secret_the_public_inputs_are_always_the_same(no_secret):
    case = Case("ring_all_reduce", 50, seed=3)
    assert rank_inputs.secret() == rank_inputs.PUBLIC_SECRET.encode()
    first, again = make_inputs(case, 4), make_inputs(case, 4)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], first[1]), "every rank gets its own values"


def test_the_secret_changes_every_input_and_every_constant(no_secret):
    random_case, constant_case = Case("naive_all_reduce", 50, seed=3), Case("naive_all_reduce", 50, inputs="constant")
    public = make_inputs(random_case, 3), constants(constant_case, 8)
    no_secret.setenv(rank_inputs.SECRET_VAR, "another grading")
    assert not any(torch.equal(a, b) for a, b in zip(public[0], make_inputs(random_case, 3)))
    assert constants(constant_case, 8) != public[1]


def test_the_grader_draws_a_root_only_secret_file_per_grading(no_secret, tmp_path):
    path = draw_input_secret(str(tmp_path))
    assert path == str(tmp_path / INPUT_SECRET) and (tmp_path / INPUT_SECRET).stat().st_mode & 0o777 == 0o600
    no_secret.setenv(rank_inputs.SECRET_FILE_VAR, path)
    first = rank_inputs.secret()
    assert first not in (rank_inputs.PUBLIC_SECRET.encode(), b"") and len(first) == 64
    draw_input_secret(str(tmp_path))                   # the next grading: a new secret in the same file
    rank_inputs._secret.cache_clear()                 # (a test process reads it once: it serves one grading)
    assert rank_inputs.secret() not in (first, rank_inputs.PUBLIC_SECRET.encode())


def test_a_secret_file_that_cannot_be_read_is_a_clear_error(no_secret, tmp_path):
    no_secret.setenv(rank_inputs.SECRET_FILE_VAR, str(tmp_path / "missing"))
    with pytest.raises(RuntimeError, match="could not be read.*grade again, or unset the variable"):
        rank_inputs.secret()


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_constants_differ_per_rank_and_their_sum_is_exact(no_secret, dtype, p):
    case = Case("ring_all_reduce", 7, dtype=dtype, inputs="constant")
    c = constants(case, p)
    assert len(set(c)) == p and min(c) >= 1
    assert sum(c) <= EXACT_INTEGERS.get(dtype, 1 << 24)
    xs = make_inputs(case, p)
    total = torch.stack(xs).sum(0, dtype=torch.float64 if DTYPES[dtype].is_floating_point else torch.int64)
    assert [x.dtype for x in xs] == [DTYPES[dtype]] * p and float(total[0]) == sum(c)
    assert float(total.to(DTYPES[dtype])[0]) == sum(c), "the sum must be exact in the case's dtype"


def test_for_ranks_gives_rank_r_its_own_input_of_every_case():
    assert rank_inputs.for_ranks([["a0", "a1"], ["b0", "b1"]]) == [(["a0", "b0"],), (["a1", "b1"],)]
    with pytest.raises(ValueError, match="one input per rank"):
        rank_inputs.for_ranks([["a0", "a1"], ["b0"]])


def test_distinct_ints_refuses_a_range_too_small():
    with pytest.raises(ValueError, match="3 different integers do not fit in \\[1, 2\\]"):
        rank_inputs.distinct_ints(3, 1, 2, "k")
