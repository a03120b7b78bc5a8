"""What crosses each stage boundary for one micro-batch: shapes and dtypes, known before running.

    specs = pipeline_spec(stages, example)        # example: one micro-batch of the first stage's input
    specs[j].in_shape, specs[j].in_dtype          # what stage j receives (j > 0)
    specs[j].out_shape, specs[j].out_dtype        # what stage j sends (j < p - 1)
    xs = split_microbatches(batch, m)             # m equal micro-batches along dim 0

A receiver allocates its buffer from the spec (a message must match it exactly), on its group.device:
spec.input_buffer(group.device). Provided code.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["StageSpec", "pipeline_spec", "split_microbatches"]


@dataclass(frozen=True)
class StageSpec:
    """Stage `index` of `n_stages`: its input and output for one micro-batch, and its parameter count."""

    index: int
    n_stages: int
    in_shape: tuple[int, ...]
    in_dtype: torch.dtype
    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    n_params: int

    def input_buffer(self, device=None) -> Tensor:
        """An empty tensor on `device` (the stage's group.device) to receive this stage's input into."""
        return torch.empty(self.in_shape, dtype=self.in_dtype, device=device)

    def output_buffer(self, device=None) -> Tensor:
        """An empty tensor on `device` (group.device) to receive the gradient of this stage's output into."""
        return torch.empty(self.out_shape, dtype=self.out_dtype, device=device)


@torch.no_grad()
def pipeline_spec(stages: list[nn.Module], example: Tensor) -> list[StageSpec]:
    """Run `example` (one micro-batch) through the stages once, without autograd; note each boundary."""
    specs, x = [], example
    for j, stage in enumerate(stages):
        y = stage(x)
        if not isinstance(y, Tensor):
            raise TypeError(f"pipeline_spec: stage {j} returned {type(y).__name__}; a stage must return one tensor")
        specs.append(StageSpec(j, len(stages), tuple(x.shape), x.dtype, tuple(y.shape), y.dtype,
                               sum(prm.numel() for prm in stage.parameters())))
        x = y
    return specs


def split_microbatches(batch: Tensor, n_microbatches: int) -> list[Tensor]:
    """Cut `batch` along dim 0 into n_microbatches equal micro-batches (views).

    Equal sizes make the mean of the micro-batch losses, each scaled by 1/m, the full batch's mean loss.
    """
    if not isinstance(n_microbatches, int) or n_microbatches < 1:
        raise ValueError(f"split_microbatches: n_microbatches must be an int >= 1, got {n_microbatches!r}")
    size = batch.shape[0] if batch.dim() else 0
    if size % n_microbatches != 0:
        raise ValueError(f"split_microbatches: a batch of {size} samples does not split into {n_microbatches} "
                         f"equal micro-batches; pick a batch size divisible by n_microbatches="
                         f"{n_microbatches} (or a number of micro-batches that divides {size})")
    return list(batch.split(size // n_microbatches))
