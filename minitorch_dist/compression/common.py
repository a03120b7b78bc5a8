"""Provided pieces of homework 3 (gradient compression): the Compressor interface, chunk
arithmetic and the argument checks whose errors the tests expect.

A compressor turns a flat tensor into a payload, a tuple of tensors that is what goes on the wire,
and back:

    payload = compressor.compress(x)                    # x (n,) float -> tuple of tensors
    x_hat = compressor.decompress(payload, n, x.dtype)  # -> (n,), an approximation of x
    compressor.payload_bytes(n, x.dtype)                # bytes of the payload: what one rank sends
    out = compressor.aggregate(payload, n, x.dtype, group, "avg")
                                                        # every rank: (1/p) sum_r decompress(payload_r)

The payload's shapes depend on n only (never on the values), so every rank's payload of the same
n has the same shapes and can be all-gathered with group.all_gather, which concatenates along
dim 0 and needs the same shape on every rank.
"""

from __future__ import annotations

import abc
import math

import torch

__all__ = ["Compressor", "num_chunks", "chunk_ids", "check_positive", "check_finite", "check_op", "REDUCE_OPS"]

REDUCE_OPS = ("avg", "sum")


class Compressor(abc.ABC):
    """What every compressor of this homework provides (see the module docstring)."""

    @abc.abstractmethod
    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x (n,), a flat floating tensor -> the payload (a tuple of tensors whose shapes depend on n only)."""

    @abc.abstractmethod
    def decompress(self, payload: tuple[torch.Tensor, ...], numel: int, dtype: torch.dtype) -> torch.Tensor:
        """The payload of a tensor of `numel` elements -> (numel,) of `dtype`."""

    @abc.abstractmethod
    def payload_bytes(self, numel: int, dtype: torch.dtype = torch.float32) -> int:
        """Bytes of the payload of a tensor of `numel` elements of `dtype` (what one rank sends)."""

    @abc.abstractmethod
    def aggregate(self, payload: tuple[torch.Tensor, ...], numel: int, dtype: torch.dtype, group,
                  op: str = "avg") -> torch.Tensor:
        """Every rank's `payload` combined over the group -> (numel,): the sum over ranks of the
        decompressed payloads ("sum"), divided by p ("avg"); the same on every rank."""


def num_chunks(numel: int, chunk: int) -> int:
    """ceil(numel / chunk): chunks of `chunk` elements, the last one possibly shorter (0 for numel 0)."""
    return math.ceil(numel / chunk)


def chunk_ids(numel: int, chunk: int, device=None) -> torch.Tensor:
    """(numel,) int64 on `device` (the data's: x.device): the chunk each element belongs to (element i
    is in chunk i // chunk)."""
    return torch.arange(numel, device=device) // chunk


def check_positive(value, what: str, allow_zero: bool = False) -> int:
    """`value` as an int, or a ValueError naming `what` (an int > 0, or >= 0 with allow_zero)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        need = "an int >= 0" if allow_zero else "an int >= 1"
        raise ValueError(f"{what} must be {need}, got {value!r}")
    return value


def check_finite(x: torch.Tensor, name: str = "x") -> None:
    """ValueError naming the tensor when it holds nan or inf (quantization scales would be nan)."""
    bad = int((~torch.isfinite(x)).sum()) if x.is_floating_point() else 0
    if bad:
        raise ValueError(f"{name} has {bad} non-finite values (nan/inf); compression needs finite values")


def check_op(op: str) -> str:
    """`op` if it is "avg" or "sum", else a ValueError."""
    if op not in REDUCE_OPS:
        raise ValueError(f"op={op!r}: a compressed all-reduce supports {REDUCE_OPS}")
    return op
