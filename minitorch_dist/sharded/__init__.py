"""Homework 6: sharded data parallelism, ZeRO-1, ZeRO-2 and FSDP.

    ZeroOptimizer               6.1  ZeRO-1: optimizer state sharded (zero.py)
    Zero2Optimizer              6.2  ZeRO-2: gradients reduce-scattered into shards too (zero.py)
    FlatParamUnit               6.3  one FSDP unit: gather, free, reduce-scatter (flat_unit.py)
    FullyShardedModel           6.3  FSDP with hooks and prefetch; 6.4 checkpointing; 6.5 mixed
                                     precision and full_parameters() (fsdp.py)
    HybridShardedModel          6.6  (bonus) HSDP: FSDP in shard groups of s ranks, gradient shards
                                     all-reduced across the N/s replicas (hybrid.py)
    FlatLayout, ShardedLayout,
    padded_numel, buckets_by_size     provided: flat buffers, padding, shards (flat.py)
    transformer_units, make_unit      provided: the unit wrapping policy (policy.py)

The homework's classes are imported on first use (a module-level __getattr__), so importing the
provided helpers (minitorch_dist.sharded.flat) never runs the files students edit.
"""

from __future__ import annotations

import importlib

from .flat import FlatLayout, ShardedLayout, buckets_by_size, padded_numel
from .policy import Slot, Unit, make_unit, transformer_units

_STUDENT = {"ZeroOptimizer": "zero", "Zero2Optimizer": "zero", "trainable_params": "zero",
            "FlatParamUnit": "flat_unit", "FullyShardedModel": "fsdp", "HybridShardedModel": "hybrid",
            "HybridParamUnit": "hybrid", "hybrid_groups": "hybrid"}

__all__ = ["FlatLayout", "ShardedLayout", "buckets_by_size", "padded_numel", "Slot", "Unit", "make_unit",
           "transformer_units", *_STUDENT]


def __getattr__(name: str):
    if name in _STUDENT:
        return getattr(importlib.import_module(f"{__name__}.{_STUDENT[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
