"""Homework 3, task 3.6 (bonus): compressing the activation at a pipeline stage boundary.

A model split in two stages (stage_split.py, provided) sends its boundary activation a (B, T, C)
from rank 0 to rank 1, and the gradient of the loss with respect to what rank 1 received back.
Here both messages go through a compressor:

    forward   rank 0: payload = F.compress(a)            send           rank 1: a_hat = F.decompress(...)
    backward  rank 1: payload = G.compress(dL/d a_hat)   send           rank 0: g_hat = G.decompress(...);
                                                                                a.backward(g_hat)

Rank 1 computes on a_hat, so the gradient it sends is the gradient at a_hat, not at a; rank 0 applies
what arrives as if it were dL/da. Any compressor of tasks 3.1-3.2 fits (Uint8Quantizer, TopK), and
LowRank, the PowerSGD idea applied to one activation: the (B T, C) matrix M is approximated by
P Q^T with P (B T, r), Q (C, r), one power iteration from a seeded random start.

Bytes on the wire per step: F.payload_bytes(B T C) forward, G.payload_bytes(B T C) backward, in one
message per payload tensor, instead of 2 B T C s dense.
"""

from __future__ import annotations

import torch

from minitorch_dist.compression.common import Compressor, check_finite, check_positive
from minitorch_dist.compression.powersgd import orthogonalize_
from minitorch_dist.compression.quantize import gather_and_sum
from minitorch_dist.compression.stage_split import (ACTIVATION_TAG, GRADIENT_TAG, payload_like, recv_payload,
                                                    send_payload)

__all__ = ["LowRank", "CompressedBoundary"]


class LowRank(Compressor):
    """A rank-r approximation of x viewed as a (n / cols, cols) matrix M, PowerSGD-style.

    Shapes: x (n,), n a multiple of cols -> payload (P (n / cols, r), Q (cols, r)) of x's dtype.
    Steps:  1. M = x.view(rows, cols); Q0 = randn(cols, r) from torch.Generator().manual_seed(seed),
               in x's dtype (the same start every call: an activation has no last step to warm from),
               drawn on the CPU and moved to x's device (group.device);
            2. P = M Q0; orthogonalize_(P) (Gram-Schmidt, task 3.4);
            3. Q = M^T P.  Decompression: P Q^T, flattened.
    A matrix of rank <= r comes back exactly (up to rounding); others lose what lies outside span(P).
    Cost: (rows + cols) r s bytes instead of rows cols s.
    Raises ValueError when rank or cols < 1 (at construction), and in compress when n is not a
    multiple of cols or r > min(rows, cols).
    """

    def __init__(self, rank: int, cols: int, seed: int = 0):
        self.rank = check_positive(rank, "rank")
        self.cols = check_positive(cols, "cols")
        self.seed = seed

    def compress(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Steps 1-3 of the class docstring; checks n and r first."""
        # BEGIN YOUR CODE  (HW3 task 3.6)
        raise NotImplementedError("HW3 task 3.6: compress is not implemented yet (see assignments/hw3/README.md)")
        # END YOUR CODE

    def decompress(self, payload, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """Shapes: (P (rows, r), Q (cols, r)) -> (numel,) of dtype: P Q^T flattened."""
        # BEGIN YOUR CODE  (HW3 task 3.6)
        raise NotImplementedError("HW3 task 3.6: decompress is not implemented yet (see assignments/hw3/README.md)")
        # END YOUR CODE

    def payload_bytes(self, numel: int, dtype: torch.dtype = torch.float32) -> int:
        return (numel // self.cols + self.cols) * self.rank * (torch.finfo(dtype).bits // 8)

    def aggregate(self, payload, numel: int, dtype: torch.dtype, group, op: str = "avg") -> torch.Tensor:
        return gather_and_sum(self, payload, numel, dtype, group, op)


class CompressedBoundary:
    """One rank's end of a compressed stage boundary with rank `peer` (module docstring).

    forward: the activation's compressor (payload tags ACTIVATION_TAG + i); backward: the
    gradient's (tags GRADIENT_TAG + i), the forward one when None. Rank 0 calls send_activation
    then recv_gradient; rank 1 recv_activation then (after its backward) send_gradient.
    Raises ValueError when peer is this rank or not a rank of the group.
    """

    def __init__(self, group, peer: int, forward: Compressor, backward: Compressor | None = None):
        if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < group.size or peer == group.rank:
            raise ValueError(f"CompressedBoundary: peer must be another rank of the group (0..{group.size - 1}, "
                             f"not this rank {group.rank}), got {peer!r}")
        self.group, self.peer = group, peer
        self.forward, self.backward = forward, forward if backward is None else backward

    def send_activation(self, activation: torch.Tensor) -> None:
        """Stage 0: compress the activation (any shape, flattened; its values, not its graph) with
        self.forward and send the payload to the peer. ValueError naming "activation" when it holds
        nan or inf (check_finite)."""
        # BEGIN YOUR CODE  (HW3 task 3.6)
        raise NotImplementedError("HW3 task 3.6: send_activation is not implemented yet (see assignments/hw3/README.md)")
        # END YOUR CODE

    def recv_activation(self, shape, dtype: torch.dtype) -> torch.Tensor:
        """Stage 1: receive the payload (buffers: payload_like), decompress it with self.forward and
        return it with `shape`, as a leaf that requires grad (stage 1's backward fills its .grad)."""
        # BEGIN YOUR CODE  (HW3 task 3.6)
        raise NotImplementedError("HW3 task 3.6: recv_activation is not implemented yet (see assignments/hw3/README.md)")
        # END YOUR CODE

    def send_gradient(self, received: torch.Tensor) -> None:
        """Stage 1, after backward: compress received.grad (the gradient at the decompressed
        activation) with self.backward and send it to the peer. ValueError when received.grad is None
        (backward has not run, or `received` is not what recv_activation returned), and one naming
        "gradient" when it holds nan or inf."""
        # BEGIN YOUR CODE  (HW3 task 3.6)
        raise NotImplementedError("HW3 task 3.6: send_gradient is not implemented yet (see assignments/hw3/README.md)")
        # END YOUR CODE

    def recv_gradient(self, activation: torch.Tensor) -> torch.Tensor:
        """Stage 0: receive the gradient's payload, decompress it with self.backward into
        activation's shape, run activation.backward with it, and return it (the gradient applied)."""
        # BEGIN YOUR CODE  (HW3 task 3.6)
        raise NotImplementedError("HW3 task 3.6: recv_gradient is not implemented yet (see assignments/hw3/README.md)")
        # END YOUR CODE
