"""Provided parts of homework 6: which trainable parameters FSDP leaves out of every unit, and the clear
error for one that nobody named (it would be neither sharded nor averaged: the ranks would drift)."""

import pytest
import torch
from torch import nn

from minitorch_dist.sharded import FullyShardedModel
from minitorch_dist.sharded.policy import left_out, make_unit


class Three(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.norm, self.last = nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 1)
        self.last.bias.requires_grad_(False)

    def forward(self, x):
        return self.last(self.norm(self.first(x)))


def test_parameters_in_no_unit_must_be_named_in_replicate():
    model = Three()
    units = [make_unit("first", model.first)]
    assert [n for n, _ in left_out(model, units, ["norm", "last.weight"])] == ["norm.weight", "norm.bias",
                                                                              "last.weight"]
    assert left_out(model, [make_unit("all", model)]) == []          # every parameter in a unit
    with pytest.raises(ValueError, match=r"in no unit: norm.weight, norm.bias, last.weight\. .*replicate="):
        left_out(model, units)
    with pytest.raises(ValueError, match=r"in no unit: last.weight\."):
        left_out(model, units, ["norm", "las"])                      # a prefix of a name is not a module


def test_fsdp_refuses_a_model_with_an_unnamed_parameter_before_communicating():
    model = Three()
    with pytest.raises(ValueError, match="norm.weight, norm.bias, last.weight"):
        FullyShardedModel(model, None, units=[make_unit("first", model.first)])     # no group is touched
    with pytest.raises(ValueError, match="compute_dtype must be a floating dtype"):
        FullyShardedModel(model, None, units=[make_unit("first", model.first)], replicate=["norm", "last"],
                          compute_dtype=torch.int8)
