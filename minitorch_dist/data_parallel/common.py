"""Provided pieces of homework 2 (data parallelism): parameter lists, flat vectors, shaped
messages and the base class the three all-reduce versions share.

Every rank builds the same model; `DataParallel` still copies rank 0's parameters and
buffers to every rank at construction, so replicas start bitwise equal whatever the seeds.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["trainable_parameters", "broadcast_module", "flat_parameters", "write_flat_", "flat_grads",
           "send_shaped", "recv_shaped", "DataParallel"]

_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
           torch.int16, torch.int8, torch.uint8, torch.bool]
_MAX_DIMS = 6


def trainable_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The parameters that get gradients, each once (a tied weight appears once), in
    registration order. Frozen parameters (requires_grad=False) are left out."""
    return [p for p in module.parameters() if p.requires_grad]


def broadcast_module(module: nn.Module, group, src: int = 0) -> None:
    """Every rank's parameters and buffers become rank `src`'s (provided broadcast)."""
    for t in list(module.parameters()) + list(module.buffers()):
        with torch.no_grad():
            group.broadcast(t.data, src=src)


def flat_parameters(params) -> torch.Tensor:
    """A new 1-D tensor: the parameters' values, concatenated in order. Shapes: sum of numels."""
    return torch.cat([p.detach().reshape(-1) for p in params]) if params else torch.empty(0)


def write_flat_(params, flat: torch.Tensor) -> None:
    """Copy consecutive slices of the 1-D `flat` into the parameters (inverse of flat_parameters)."""
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    if offset != flat.numel():
        raise ValueError(f"write_flat_: the parameters hold {offset} elements, the flat vector {flat.numel()}")


def flat_grads(params) -> torch.Tensor:
    """A new 1-D tensor of the parameters' gradients in order; a missing gradient counts as zeros."""
    parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
             for p in params]
    return torch.cat(parts) if parts else torch.empty(0)


def send_shaped(group, tensor: torch.Tensor, dst: int, tag: int = 0) -> None:
    """Send a tensor whose dtype and shape the receiver does not know (recv_shaped receives it).

    Two messages: an int64 header (dtype code, ndim, shape) and the tensor. Up to 6 dims.
    """
    if tensor.dim() > _MAX_DIMS or tensor.dtype not in _DTYPES:
        raise ValueError(f"send_shaped on rank {group.rank}: supports up to {_MAX_DIMS} dims and dtypes "
                         f"{_DTYPES}; got {tensor.dtype} with shape {tuple(tensor.shape)}")
    header = torch.zeros(2 + _MAX_DIMS, dtype=torch.int64, device=group.device)
    header[0], header[1] = _DTYPES.index(tensor.dtype), tensor.dim()
    header[2:2 + tensor.dim()] = torch.tensor(tensor.shape, dtype=torch.int64, device=group.device)
    group.send(header, dst, tag)
    group.send(tensor.contiguous(), dst, tag)


def recv_shaped(group, src: int, tag: int = 0) -> torch.Tensor:
    """Receive a tensor sent with send_shaped; returns a new tensor of the sent dtype and shape."""
    header = group.recv(torch.empty(2 + _MAX_DIMS, dtype=torch.int64, device=group.device), src, tag)
    dtype, ndim = _DTYPES[int(header[0])], int(header[1])
    return group.recv(torch.empty(tuple(header[2:2 + ndim].tolist()), dtype=dtype, device=group.device), src, tag)


class DataParallel(nn.Module):
    """What the three all-reduce versions share. Use it like torch's DistributedDataParallel:

        model = BucketedDDP(MLP(), group, bucket_size_mb=1.0)
        loss_fn(model(x), y).backward()           # x, y: this rank's part of the global batch
        model.finish_gradient_synchronization()   # every .grad is now the mean over ranks
        optimizer.step()                          # the optimizer is built on model.parameters()

    Gradient accumulation: run the backward passes of all micro-batches but the last under
    `with model.no_sync():` (no communication), the last one outside it, then finish.
    A parameter unused in a step must be unused on every rank; its .grad stays None (the
    optimizer skips it), as in a single-process run. Frozen parameters are never sent.
    """

    def __init__(self, module: nn.Module, group):
        super().__init__()
        self.module = module
        self.group = group
        self.require_sync = True
        broadcast_module(module, group)
        self.params = trainable_parameters(module)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextmanager
    def no_sync(self):
        """Backward passes inside this block only accumulate gradients locally."""
        before, self.require_sync = self.require_sync, False
        try:
            yield
        finally:
            self.require_sync = before

    def finish_gradient_synchronization(self) -> None:
        """Make every trainable .grad the mean of the ranks' gradients; call after backward."""
        raise NotImplementedError
