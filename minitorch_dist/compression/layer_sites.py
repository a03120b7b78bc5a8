"""Provided for homework 3, task 3.6 (bonus): compress the activations of chosen blocks of a
CharTransformer, in one process, to ask where in the model compression hurts.

    with compressed_layers(model, blocks=[0, 1], make=lambda: TopK(k), site="branch"):
        logits = model(idx)               # blocks 0 and 1 see their messages compressed

What is compressed at each chosen block (a "site"), the message a model-parallel layer would send:
- site "block": the block's output, the residual stream (B, T, C): what a pipeline stage boundary right
  after that block sends (stage_split.py). Block b with backward=True computes what two_stage_step
  computes through a CompressedBoundary at boundary b + 1 with the same compressors.
- site "branch": the attention's output and the MLP's output (B, T, C) each, before they join the
  residual stream: what a tensor-parallel layer all-reduces in the forward pass (Megatron style: the
  output of the row-parallel projection), two messages per block.
Each message x becomes decompress(compress(x)) with a compressor of its own (`make()` is called once
per message and site). Backward: the gradient passes through unchanged (backward=False, as for a
tensor-parallel all-reduce, whose backward sends nothing), or through the same kind of compression
(backward=True, as at a stage boundary, where the gradient is sent back).

Nothing is sent: compression happens in this process, so a sweep over sites costs compute only. The
model's modules are not changed; forward hooks are added on entry and removed on exit.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator

import torch
from torch import Tensor

from minitorch_dist.compression.common import Compressor
from minitorch_dist.models import CharTransformer

__all__ = ["compressed_layers", "round_trip", "SITES"]

SITES = ("block", "branch")


def round_trip(compressor: Compressor, x: Tensor) -> Tensor:
    """decompress(compress(x)) in x's shape and dtype: what the receiver of x's message gets."""
    flat = x.detach().reshape(-1)
    return compressor.decompress(compressor.compress(flat), flat.numel(), x.dtype).reshape(x.shape)


class _Compressed(torch.autograd.Function):
    """Forward x -> round_trip(forward, x); backward g -> round_trip(backward, g), or g when None."""

    @staticmethod
    def forward(ctx, x: Tensor, forward: Compressor, backward: Compressor | None) -> Tensor:
        ctx.backward_compressor = backward
        return round_trip(forward, x)

    @staticmethod
    def backward(ctx, grad: Tensor):
        back = ctx.backward_compressor
        return (grad if back is None else round_trip(back, grad)), None, None


def _hook(make: Callable[[], Compressor], backward: bool):
    forward_compressor, backward_compressor = make(), (make() if backward else None)

    def hook(module, inputs, output: Tensor) -> Tensor:
        return _Compressed.apply(output, forward_compressor, backward_compressor)
    return hook


def _modules_at(model: CharTransformer, block: int, site: str) -> list:
    b = model.blocks[block]
    return [b] if site == "block" else [b.attn, b.fc_proj]


@contextlib.contextmanager
def compressed_layers(model: CharTransformer, blocks: Iterable[int], make: Callable[[], Compressor],
                      site: str = "branch", backward: bool = False) -> Iterator[CharTransformer]:
    """Within the block, `model`'s forward compresses the messages of `blocks` at `site` (module docstring).

    blocks: block indices in 0..model.n_layers - 1 (an empty list compresses nothing); make: a function
    returning a fresh Compressor (called once per message, twice with backward=True). Yields the model.
    Raises ValueError for an unknown site, a block out of range, or make() not giving a Compressor.
    """
    if site not in SITES:
        raise ValueError(f"compressed_layers: site must be one of {SITES} (the block's output, or its attention "
                         f"and MLP outputs before the residual add), got {site!r}")
    blocks = list(blocks)
    bad = [b for b in blocks if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < model.n_layers]
    if bad:
        raise ValueError(f"compressed_layers: blocks must be ints in 0..{model.n_layers - 1} for this "
                         f"{model.n_layers}-block model, got {bad}")
    if not callable(make) or isinstance(make, Compressor) or not isinstance(make(), Compressor):
        raise ValueError(f"compressed_layers: make() must return a Compressor (TopK(k), LowRank(r, C), ...), "
                         f"got {make!r}; pass a function, e.g. make=lambda: TopK(k)")
    handles = [module.register_forward_hook(_hook(make, backward))
               for b in sorted(set(blocks)) for module in _modules_at(model, b, site)]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()
