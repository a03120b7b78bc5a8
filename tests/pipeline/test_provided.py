"""Provided parts of homework 5, as pure functions: the partitioner, the stage specs, the action
format and the schedule validator (which must name the rank and the action of what is wrong)."""

import pytest
import torch

from minitorch_dist.models import MLP, CharTransformer
from minitorch_dist.pipeline.actions import Action, format_schedule, parse_action, parse_schedule
from minitorch_dist.pipeline.partition import balance_by_params, char_transformer_layers, mlp_layers, stages_of
from minitorch_dist.pipeline.spec import pipeline_spec, split_microbatches
from minitorch_dist.pipeline.validate import ScheduleError, validate_schedule


def lanes_1f1b_by_hand():
    """1F1B, p = 2, m = 2, written out."""
    return [["F0", "SEND_F0", "F1", "SEND_F1", "RECV_B0", "B0", "RECV_B1", "B1"],
            ["RECV_F0", "F0", "B0", "SEND_B0", "RECV_F1", "F1", "B1", "SEND_B1"]]


def test_balance_minimises_the_largest_stage():
    assert balance_by_params([5, 1, 1, 1, 5], 3) == [(0, 1), (1, 4), (4, 5)]
    assert balance_by_params([1, 1, 1, 1], 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert balance_by_params([3, 3, 3], 1) == [(0, 3)]
    sizes = [7, 2, 9, 4, 4, 1, 8]
    for p in range(1, 8):
        bounds = balance_by_params(sizes, p)
        assert bounds[0][0] == 0 and bounds[-1][1] == len(sizes) and all(a < b for a, b in bounds)
        best = _best_cuts(len(sizes), p, sizes)
        assert max(sum(sizes[a:b]) for a, b in bounds) == max(sum(sizes[a:b]) for a, b in best)


def _best_cuts(n, p, sizes):
    """Brute force for the test: the best partition's bounds."""
    import itertools
    best = None
    for cuts in itertools.combinations(range(1, n), p - 1):
        edges = (0, *cuts, n)
        bounds = list(zip(edges, edges[1:]))
        if best is None or max(sum(sizes[a:b]) for a, b in bounds) < max(sum(sizes[a:b]) for a, b in best):
            best = bounds
    return best


def test_balance_errors_say_what_to_do():
    with pytest.raises(ValueError, match="3 layers cannot fill 4 stages"):
        balance_by_params([1, 1, 1], 4)
    with pytest.raises(ValueError, match=">= 1"):
        balance_by_params([1], 0)


def test_stages_run_in_order_equal_the_model():
    model = CharTransformer(20, d_model=16, n_heads=2, n_layers=3, max_len=8, tie_weights=False).double()
    idx = torch.randint(0, 20, (2, 8))
    for p in (1, 2, 3, 5):
        x = idx
        for stage in stages_of(model, p):
            x = stage(x)
        assert torch.equal(x, model(idx))
    mlp = MLP(depth=3).double()
    data = torch.randn(5, 16, dtype=torch.float64)
    y = data
    for stage in stages_of(mlp, 4):
        y = stage(y)
    assert torch.equal(y, mlp(data))
    assert len(mlp_layers(mlp)) == 4


def test_tied_weights_and_other_models_are_refused():
    with pytest.raises(ValueError, match="tie_weights=False"):
        char_transformer_layers(CharTransformer(20))
    with pytest.raises(TypeError, match="balance_by_params"):
        stages_of(torch.nn.Linear(2, 2), 1)


def test_spec_and_microbatches():
    model = CharTransformer(20, d_model=16, n_heads=2, n_layers=2, max_len=8, tie_weights=False)
    specs = pipeline_spec(stages_of(model, 4), torch.zeros(3, 8, dtype=torch.int64))
    assert [s.in_shape for s in specs] == [(3, 8), (3, 8, 16), (3, 8, 16), (3, 8, 16)]
    assert specs[0].in_dtype == torch.int64 and specs[-1].out_shape == (3, 8, 20)
    assert specs[1].input_buffer().shape == (3, 8, 16)
    assert [t.shape[0] for t in split_microbatches(torch.zeros(12, 2), 3)] == [4, 4, 4]
    with pytest.raises(ValueError, match="batch of 7 samples does not split into 2"):
        split_microbatches(torch.zeros(7, 2), 2)


def test_actions_print_and_parse():
    assert str(Action("RECV_B", 3)) == "RECV_B3" and parse_action("SEND_F12") == Action("SEND_F", 12)
    with pytest.raises(ValueError, match="not an action"):
        parse_action("G3")
    assert format_schedule(lanes_1f1b_by_hand()) == "rank 0: F0 F1 B0 B1\nrank 1: F0 B0 F1 B1"
    assert parse_schedule([["F0"]]) == [[Action("F", 0)]]


def test_validator_accepts_a_valid_schedule():
    assert validate_schedule(lanes_1f1b_by_hand(), 2)[1][0] == Action("RECV_F", 0)
    validate_schedule([["F0", "B0", "F1", "B1"]], 2)


@pytest.mark.parametrize("edit,message", [
    (lambda s: s[1].remove("B1"), r"rank 1: F1 has no backward \(B1\)"),
    (lambda s: s[0].remove("SEND_F1"), r"rank 1, action 4 \(RECV_F1\): this receive has no matching SEND_F1 on rank 0"),
    (lambda s: s[1].remove("RECV_F1"), r"rank 0, action 3 \(SEND_F1\): this send has no matching RECV_F1 on rank 1"),
    (lambda s: s[0].insert(0, s[0].pop(s[0].index("B0"))), r"rank 0, action 0 \(B0\): comes before F0"),
    (lambda s: s[0].append("F1"), r"rank 0, action 8 \(F1\): runs twice"),
    (lambda s: s[0].append("RECV_F0"), r"rank 0, action 8 \(RECV_F0\): stage 0 of 2 has no previous stage"),
    (lambda s: s[1].append("F5"), r"rank 1, action 8 \(F5\): micro-batch 5 does not exist"),
])
def test_validator_names_rank_and_action(edit, message):
    lanes = lanes_1f1b_by_hand()
    edit(lanes)
    with pytest.raises(ScheduleError, match=message):
        validate_schedule(lanes, 2)


def test_validator_finds_the_wait_for_cycle():
    lanes = lanes_1f1b_by_hand()
    lanes[0] = ["F0", "RECV_B0", "SEND_F0", "B0", "F1", "SEND_F1", "RECV_B1", "B1"]   # waits before it sends
    with pytest.raises(ScheduleError, match=r"rank 0 waits at action 1 \(RECV_B0\) for rank 1; rank 1 waits at "
                                            r"action 0 \(RECV_F0\) for rank 0; wait-for cycle: 0 -> 1 -> 0"):
        validate_schedule(lanes, 2)
