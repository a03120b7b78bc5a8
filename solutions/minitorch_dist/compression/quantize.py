"""Homework 3, task 3.1: quantization, and the all-reduce of compressed payloads.

    Uint8Quantizer(chunk)   per chunk of `chunk` elements a float32 scale and zero point (the chunk's
                            minimum), every element one uint8 level: x ~ zero + q * scale,
                            scale = (max - min) / 255. Error per element at most scale / 2.
    SignQuantizer(chunk)    one bit per element (its sign), 8 per byte, and a float32 scale per
                            chunk, the mean |x| of the chunk: x ~ +-scale (signSGD with a scale).
    compressed_all_reduce   compress, all-gather every payload tensor, decompress each rank's part
                            and add them up (then / p for "avg").

Why gather and not sum: the uint8 levels of p ranks do not add up to a uint8 (255 + 255 overflows),
and level q means a different number on every rank (each has its own scale and zero point), so a
sum of levels means nothing. Each rank must decompress every other rank's payload with that rank's
scales: all-gather the payloads, then decompress and add locally.

Cost of one compressed all-reduce of n float elements (s bytes each), chunks of c, p ranks: every
rank's all-gather input is the payload, b = n + 8 ceil(n/c) bytes (uint8) or ceil(n/8) + 4 ceil(n/c)
(sign); on a ring each rank sends and receives (p-1) b bytes, against 2 (p-1)/p n s for a dense
ring all-reduce. The payload is about s times (uint8) or 8 s times (sign) smaller, but the gather
grows with p: it pays while (p-1) b < 2 (p-1)/p n s, i.e. p < 2 s n / b.

Allocate on the data's device, which is group.device (a GPU on backend nccl): device=x.device in
compress, the payload's device in decompress, chunk_ids(n, chunk, x.device).
"""

from __future__ import annotations

import torch

from minitorch_dist.compression.common import (Compressor, check_finite, check_op, check_positive, chunk_ids,
                                               num_chunks)

__all__ = ["Uint8Quantizer", "SignQuantizer", "compressed_all_reduce", "gather_and_sum"]

LEVELS = 256


class Uint8Quantizer(Compressor):
    """Min/max affine quantization to 256 levels, per chunk of `chunk` elements.

    Shapes: x (n,) -> payload (q uint8 (n,), scale float32 (ceil(n/c),), zero float32 (ceil(n/c),)).
    Chunk j holds elements [j c, (j+1) c) (the last one may be shorter); its zero point is its
    minimum and its scale (max - min) / 255, both rounded to float32. Decompression gives
    zero + q * scale in the requested dtype: within scale / 2 of x (a constant chunk, scale 0,
    comes back exactly; values on the grid zero + q * scale come back exactly).
    Cost: a payload of n + 8 ceil(n/c) bytes, about 1/s of the dense n s bytes (s = 4 for float32).
    Raises ValueError when chunk < 1.
    """

    def __init__(self, chunk: int):
        self.chunk = check_positive(chunk, "chunk")

    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Steps: per chunk min and max, scale and zero point in float32; q = round((x - zero) / scale)
        clamped to 0..255 (0 where scale is 0)."""
        # BEGIN SOLUTION  (HW3 task 3.1)
        x = x.reshape(-1)
        n, m = x.numel(), num_chunks(x.numel(), self.chunk)
        ids = chunk_ids(n, self.chunk, x.device)                                   # (n,)
        lo = torch.full((m,), float("inf"), dtype=x.dtype, device=x.device).scatter_reduce(0, ids, x, "amin")
        hi = torch.full((m,), float("-inf"), dtype=x.dtype, device=x.device).scatter_reduce(0, ids, x, "amax")
        zero = lo.to(torch.float32)                                                # (m,)
        scale = ((hi - lo) / (LEVELS - 1)).to(torch.float32)                       # (m,)
        step = scale.to(x.dtype)[ids]                                              # (n,)
        levels = (x - zero.to(x.dtype)[ids]) / torch.where(step > 0, step, torch.ones_like(step))
        q = levels.round().clamp(0, LEVELS - 1).to(torch.uint8)                    # (n,)
        return q, scale, zero
        # END SOLUTION

    def decompress(self, payload, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """Shapes: the payload of n elements -> (n,) of dtype: zero + q * scale per chunk."""
        # BEGIN SOLUTION  (HW3 task 3.1)
        q, scale, zero = payload
        ids = chunk_ids(numel, self.chunk, q.device)
        return zero.to(dtype)[ids] + q.to(dtype) * scale.to(dtype)[ids]
        # END SOLUTION

    def payload_bytes(self, numel: int, dtype: torch.dtype = torch.float32) -> int:
        return numel + 8 * num_chunks(numel, self.chunk)

    def aggregate(self, payload, numel: int, dtype: torch.dtype, group, op: str = "avg") -> torch.Tensor:
        return gather_and_sum(self, payload, numel, dtype, group, op)


class SignQuantizer(Compressor):
    """signSGD with a scale: one bit per element, packed 8 per byte, and a float32 scale per chunk.

    Shapes: x (n,) -> payload (bits uint8 (ceil(n/8),), scale float32 (ceil(n/c),)).
    Element i is bit i % 8 of byte i // 8 (1 when x_i >= 0). The scale of chunk j is the mean |x|
    over its elements; decompression gives +scale where the bit is 1 and -scale where it is 0.
    Cost: a payload of ceil(n/8) + 4 ceil(n/c) bytes, about 1/(8 s) of the dense n s bytes.
    Raises ValueError when chunk < 1.
    """

    def __init__(self, chunk: int):
        self.chunk = check_positive(chunk, "chunk")

    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Steps: bits (x >= 0), padded to a multiple of 8 and packed into bytes; the mean |x| per chunk."""
        # BEGIN SOLUTION  (HW3 task 3.1)
        x = x.reshape(-1)
        n, m = x.numel(), num_chunks(x.numel(), self.chunk)
        ids = chunk_ids(n, self.chunk, x.device)
        sums = torch.zeros(m, dtype=x.dtype, device=x.device).index_add_(0, ids, x.abs())   # (m,)
        counts = torch.bincount(ids, minlength=m).to(x.dtype)                      # (m,)
        scale = (sums / counts.clamp(min=1)).to(torch.float32)
        bits = torch.zeros(num_chunks(n, 8) * 8, dtype=torch.uint8, device=x.device)   # (8 ceil(n/8),)
        bits[:n] = (x >= 0).to(torch.uint8)
        weights = torch.tensor([1 << j for j in range(8)], dtype=torch.uint8, device=x.device)
        packed = (bits.view(-1, 8) * weights).sum(dim=1, dtype=torch.uint8)        # (ceil(n/8),)
        return packed, scale
        # END SOLUTION

    def decompress(self, payload, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """Shapes: the payload of n elements -> (n,) of dtype: +-scale of the element's chunk."""
        # BEGIN SOLUTION  (HW3 task 3.1)
        packed, scale = payload
        shifts = torch.arange(8, dtype=torch.uint8, device=packed.device)
        bits = ((packed.unsqueeze(1) >> shifts) & 1).reshape(-1)[:numel]          # (n,)
        mag = scale.to(dtype)[chunk_ids(numel, self.chunk, scale.device)]
        return torch.where(bits.bool(), mag, -mag)
        # END SOLUTION

    def payload_bytes(self, numel: int, dtype: torch.dtype = torch.float32) -> int:
        return num_chunks(numel, 8) + 4 * num_chunks(numel, self.chunk)

    def aggregate(self, payload, numel: int, dtype: torch.dtype, group, op: str = "avg") -> torch.Tensor:
        return gather_and_sum(self, payload, numel, dtype, group, op)


def gather_and_sum(compressor: Compressor, payload, numel: int, dtype: torch.dtype, group,
                   op: str = "avg") -> torch.Tensor:
    """Every rank's payload to every rank, decompressed and added up, in rank order.

    Why a gather and not an all-reduce of the payload: the sum of p uint8 levels overflows a uint8,
    and the ranks' scales and zero points differ, so a level means a different value on each rank.

    Shapes: payload, a tuple of tensors of shapes (m_i, ...) equal on every rank -> (numel,) of dtype.
    Steps: one group.all_gather per payload tensor ((m_i, ...) -> (p m_i, ...)); rank r's part of
    each is rows [r m_i, (r+1) m_i); decompress every rank's part, add them for r = 0..p-1; / p for "avg".
    Cost: each rank's all-gather inputs add up to payload_bytes(numel) bytes; on a ring it sends
    and receives (p-1) times that.
    """
    # BEGIN SOLUTION  (HW3 task 3.1)
    check_op(op)
    p = group.size
    gathered = [group.all_gather(t) for t in payload]                              # (p m_i, ...) each
    total = torch.zeros(numel, dtype=dtype, device=group.device)
    for r in range(p):
        part = tuple(g.narrow(0, r * (g.shape[0] // p), g.shape[0] // p) for g in gathered)
        total += compressor.decompress(part, numel, dtype)
    return total / p if op == "avg" else total
    # END SOLUTION


def compressed_all_reduce(x: torch.Tensor, group, compressor: Compressor, op: str = "avg") -> torch.Tensor:
    """All-reduce of `x` through `compressor`: what every rank gets is the sum ("sum") or the mean
    ("avg") over ranks of decompress(compress(x_r)). `x` is not modified.

    Shapes: x (...) float, the same shape on every rank -> a new tensor of x's shape and dtype,
    the same on every rank.
    Steps: check op and that x is finite; compress the flattened x; compressor.aggregate(payload)
    (gather_and_sum for the quantizers: never an all-reduce of the levels, see the module docstring).
    Cost: the compressor's; Uint8Quantizer: (p-1) (n + 8 ceil(n/c)) bytes per rank on a ring.
    Raises ValueError when x holds nan or inf (naming it: "x has 3 non-finite values ...") or op is
    not "avg" or "sum".
    """
    # BEGIN SOLUTION  (HW3 task 3.1)
    check_op(op)
    check_finite(x, "x")
    flat = x.detach().reshape(-1)
    payload = compressor.compress(flat)
    return compressor.aggregate(payload, flat.numel(), x.dtype, group, op).view(x.shape)
    # END SOLUTION
