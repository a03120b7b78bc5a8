"""Provided for homework 3, task 3.6 (bonus): the CharTransformer split into two pipeline stages on
ranks 0 and 1, and the point-to-point transport of a payload across the stage boundary.

    stage0, stage1 = split_char_transformer(model, boundary)   # blocks [0, boundary) on stage 0
    buffers = payload_like(compressor, numel, dtype, group.device)   # empty tensors shaped as its payload
    send_payload(group, payload, dst, tag)                      # one message per payload tensor
    recv_payload(group, buffers, src, tag)                      # fills the buffers (blocks)
    loss = two_stage_step(group, stage, idx, targets, link)     # one forward and backward, 2 ranks

`link` is task 3.6's CompressedBoundary (activations.py): rank 0 runs stage 0 and sends its output
forward through the link, then receives the output's gradient and runs its backward; rank 1 receives
the activation, runs stage 1 and the loss, runs backward and sends the activation's gradient back.
Identity() is the compressor that sends the tensor as it is: with it the split is exact (the same
gradients as the unsplit model).

Tags: the payload's tensor i goes with tag ACTIVATION_TAG + i forward, GRADIENT_TAG + i backward.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minitorch_dist.compression.common import Compressor, check_op
from minitorch_dist.models import CharTransformer
from minitorch_dist.pipeline.partition import char_transformer_layers, split_layers

__all__ = ["Identity", "split_char_transformer", "payload_like", "send_payload", "recv_payload",
           "two_stage_step", "ACTIVATION_TAG", "GRADIENT_TAG"]

ACTIVATION_TAG, GRADIENT_TAG = 1300, 1400


class Identity(Compressor):
    """No compression: the payload is (x,) itself, n s bytes. The baseline, and the exact split."""

    def compress(self, x: Tensor) -> tuple[Tensor, ...]:
        return (x.reshape(-1).clone(),)

    def decompress(self, payload, numel: int, dtype: torch.dtype) -> Tensor:
        return payload[0].to(dtype).reshape(numel)

    def payload_bytes(self, numel: int, dtype: torch.dtype = torch.float32) -> int:
        return numel * (torch.finfo(dtype).bits // 8)

    def aggregate(self, payload, numel: int, dtype: torch.dtype, group, op: str = "avg") -> Tensor:
        return group.all_reduce(self.decompress(payload, numel, dtype).clone(), check_op(op))


def split_char_transformer(model: CharTransformer, boundary: int) -> tuple[nn.Sequential, nn.Sequential]:
    """(stage 0, stage 1): the embeddings and blocks [0, boundary), then blocks [boundary, L) and the head.

    boundary 0 cuts right after the embeddings (the earliest boundary), boundary L = model.n_layers
    right before the final LayerNorm and LM head (the latest). Shapes: stage 0 (B, T) int64 ->
    (B, T, C); stage 1 (B, T, C) -> logits (B, T, V). The stages hold the model's own modules.
    """
    if isinstance(boundary, bool) or not isinstance(boundary, int) or not 0 <= boundary <= model.n_layers:
        raise ValueError(f"split_char_transformer: boundary must be an int in 0..{model.n_layers} (the number of "
                         f"blocks on stage 0 of this {model.n_layers}-block model), got {boundary!r}")
    layers = char_transformer_layers(model)          # [embedding, block 0, ..., block L-1, head]
    return tuple(split_layers(layers, [(0, boundary + 1), (boundary + 1, len(layers))]))


def payload_like(compressor: Compressor, numel: int, dtype: torch.dtype, device=None) -> list[Tensor]:
    """Empty receive buffers on `device` (group.device) with the shapes and dtypes of `compressor`'s
    payload of `numel` elements.

    A payload's shapes depend on numel only (common.py), so a copy of the compressor (its state, a
    random-k step counter, is left alone) compresses zeros and the shapes are taken from that.
    """
    probe = copy.deepcopy(compressor).compress(torch.zeros(numel, dtype=dtype, device=device))
    return [torch.empty_like(t) for t in probe]


def send_payload(group, payload, dst: int, tag: int) -> None:
    """Send each tensor of `payload` to rank `dst` (tag + i for tensor i); bytes: the payload's."""
    for i, t in enumerate(payload):
        group.send(t.detach().contiguous(), dst, tag=tag + i)


def recv_payload(group, buffers, src: int, tag: int) -> list[Tensor]:
    """Receive into each of `buffers` from rank `src` (tag + i for buffer i); returns the buffers."""
    for i, t in enumerate(buffers):
        group.recv(t, src, tag=tag + i)
    return list(buffers)


def two_stage_step(group, stage: nn.Module, idx: Tensor, targets: Tensor, link) -> float | None:
    """One forward and backward of the split model on ranks 0 (stage 0) and 1 (stage 1).

    Rank 0: a = stage(idx) (B, T, C); link.send_activation(a); link.recv_gradient(a) runs a's backward.
    Rank 1: x = link.recv_activation((B, T, C), dtype); loss = cross_entropy(stage(x)); loss.backward();
    link.send_gradient(x). Returns the loss on rank 1, None on rank 0. The parameters' .grad are filled
    (accumulated); the caller steps the optimizer.
    """
    if group.rank == 0:
        activation = stage(idx)                                        # (B, T, C)
        link.send_activation(activation)
        link.recv_gradient(activation)
        return None
    if group.rank != 1:
        raise ValueError(f"two_stage_step: the two stages live on ranks 0 and 1; rank {group.rank} has none")
    dtype = next(stage.parameters()).dtype
    x = link.recv_activation((*idx.shape, stage_width(stage)), dtype)  # (B, T, C)
    logits = stage(x)                                                  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    link.send_gradient(x)
    return loss.item()


def stage_width(stage: nn.Module) -> int:
    """C, the width of the activation stage 1 receives (its first LayerNorm's size)."""
    for module in stage.modules():
        if isinstance(module, nn.LayerNorm):
            return module.normalized_shape[0]
    raise ValueError("stage_width: this stage has no LayerNorm; is it stage 1 of split_char_transformer?")
