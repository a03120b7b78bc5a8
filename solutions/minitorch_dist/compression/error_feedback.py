"""Homework 3, task 3.3: error feedback, what compression drops is added back on the next step.

    ErrorFeedback(compressor)   keeps a residual e per tensor name (zeros at first). For an input g:
                                    delta = g + e
                                    send c = compress(delta)
                                    e <- delta - decompress(c)
                                Nothing is lost, only delayed: after T steps,
                                    sum_t decompress(c_t) + e_T == sum_t g_t
                                (exactly, when the arithmetic is: e.g. top-k in float64).

With a biased compressor such as signSGD, the residual is what makes it converge: plain signSGD
with a fixed step stalls where the signs of the ranks' gradients disagree, error-feedback signSGD
does not (Karimireddy et al. 2019, "Error feedback fixes SignSGD").

Cost: the compressor's; memory, one residual of n elements per tensor name on every rank.
"""

from __future__ import annotations

import torch

from minitorch_dist.compression.common import Compressor, check_finite

__all__ = ["ErrorFeedback", "ef_compressed_all_reduce"]


class ErrorFeedback:
    """A compressor with a memory: the residual of each named tensor.

    Shapes: g (...) float; the residual of a name is a flat (n,) tensor of g's dtype.
    Cost: nothing more on the wire than the compressor; n s bytes of memory per name.
    """

    def __init__(self, compressor: Compressor):
        self.compressor = compressor
        self.residuals: dict[str, torch.Tensor] = {}

    def error(self, name: str) -> torch.Tensor:
        """The current residual of `name`, (n,) (an empty tensor before its first compress)."""
        return self.residuals.get(name, torch.zeros(0))

    def compress(self, name: str, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The payload to send for `g`, with the residual of `name` added, and the new residual kept.

        Shapes: g (...) float, n elements -> the compressor's payload of n elements.
        Steps: delta = g.flatten() + e (e = zeros the first time); c = compress(delta);
        e <- delta - decompress(c, n, dtype); return c. `g` is not modified.
        Raises ValueError when g holds nan or inf (naming it), or when g's number of elements
        differs from the residual of `name` (a different tensor under the same name).
        """
        # BEGIN SOLUTION  (HW3 task 3.3)
        check_finite(g, "g")
        flat = g.detach().reshape(-1)
        e = self.residuals.get(name)
        if e is None:
            e = torch.zeros_like(flat)
        elif e.numel() != flat.numel():
            raise ValueError(f"error feedback: {name!r} has a residual of {e.numel()} elements but g has "
                             f"{flat.numel()}; use one name per tensor")
        delta = flat + e                                                               # (n,)
        payload = self.compressor.compress(delta)
        self.residuals[name] = delta - self.compressor.decompress(payload, flat.numel(), flat.dtype)
        return payload
        # END SOLUTION

    def all_reduce(self, name: str, g: torch.Tensor, group, op: str = "avg") -> torch.Tensor:
        """The compressed all-reduce of g with error feedback: every rank gets the sum ("sum") or mean
        ("avg") over ranks of decompress(c_r), where c_r = self.compress(name, g_r).

        Shapes: g (...) -> a new tensor of g's shape and dtype, the same on every rank.
        Steps: c = self.compress(name, g); compressor.aggregate(c, n, dtype, group, op); view as g.
        Cost: the compressor's aggregate (e.g. TopK: (p-1) k (s + 4) bytes sent per rank).
        """
        # BEGIN SOLUTION  (HW3 task 3.3)
        payload = self.compress(name, g)
        out = self.compressor.aggregate(payload, g.numel(), g.dtype, group, op)
        return out.view(g.shape)
        # END SOLUTION


def ef_compressed_all_reduce(ef: ErrorFeedback, name: str, g: torch.Tensor, group, op: str = "avg") -> torch.Tensor:
    """ef.all_reduce(name, g, group, op), as a function (the same contract)."""
    return ef.all_reduce(name, g, group, op)
