"""Homework 6, tasks 6.3 and 6.5: one FSDP unit, a flat parameter sharded over the group.

    unit = FlatParamUnit(spec, group)              # spec: a policy.Unit (transformer_units)
    unit.gather()                                  # before the unit's forward (and its backward)
    unit.use_full_views()                          # the modules now see views of the full tensor
    ...forward...; unit.free()                     # after its forward: back to the shard only
    ...backward fills unit.full.grad...; unit.reduce_gradient()   # reduce-scatter, free

Memory: `shard` (padded / p elements, an nn.Parameter in the master dtype) always; `full`
(padded elements, the compute dtype) only between gather() and free(): free() resizes its storage
to 0 bytes, gather() gives it its bytes back. Autograd saved views of `full` in the forward (a
linear layer saves its weight); they share that storage, so the backward's gather() refills them.
The refill writes through `full.data`, which has its own version counter: autograd does not see
an in-place change of a tensor it saved.

Mixed precision (6.5): with compute_dtype (torch.bfloat16) the shard stays in its own dtype
(float32, the master copy) and the optimizer steps on it; gather() all-gathers the shard cast to
the compute dtype (half the bytes), and reduce_gradient() casts the gradient back to the shard's
dtype before the reduce-scatter (float32 gradients).

Cost per unit and step: all-gather forward + all-gather backward + reduce-scatter, each of the
padded unit: 3 Psi (p-1)/p elements sent per rank for the whole model.
"""

from __future__ import annotations

import torch
from torch import nn

from minitorch_dist.sharded.flat import FlatLayout
from minitorch_dist.sharded.policy import Unit

__all__ = ["FlatParamUnit"]


class FlatParamUnit:
    """One unit's trainable parameters as a flat parameter: `shard` kept, `full` gathered on demand.

    Attributes: spec (the policy Unit), group, layout (FlatLayout of the unit's slots), shard
    (nn.Parameter, layout.chunk_numel elements), full (leaf tensor of layout.padded elements,
    requires grad, storage 0 bytes while freed), gathered (bool), handle (an async all-gather in
    flight, or None), compute_dtype, mixed (compute_dtype differs from the shard's). Everything
    lives on the parameters' device, group.device (torch.empty(..., device=flat.device)).
    """

    def __init__(self, spec: Unit, group, compute_dtype: torch.dtype | None = None):
        self.spec, self.group = spec, group
        self.layout = FlatLayout([s.param.shape for s in spec.slots], group.size)
        self.handle = None
        self.gathered = False
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: __init__ is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def start_gather(self) -> None:
        """Post the all-gather of the shard (async) unless gathered or already posted."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: start_gather is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def gather(self) -> None:
        """Make `full` hold every rank's shard (waits for a posted all-gather, or does one now)."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: gather is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def use_full_views(self) -> None:
        """Point every module attribute of the unit at its view of `full` (call after gather())."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: use_full_views is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def free(self) -> None:
        """Drop the gathered parameters: `full`'s storage back to 0 bytes."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: free is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def compute_copy(self) -> torch.Tensor:
        """Mixed precision: the shard in the compute dtype, what the all-gather sends (a new tensor)."""
        # BEGIN YOUR CODE  (HW6 task 6.5)
        raise NotImplementedError("HW6 task 6.5: compute_copy is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def master_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        """Mixed precision: the full gradient (compute dtype) in the shard's dtype, for the reduce-scatter."""
        # BEGIN YOUR CODE  (HW6 task 6.5)
        raise NotImplementedError("HW6 task 6.5: master_gradient is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def reduce_gradient(self) -> None:
        """full.grad -> this rank's shard of the mean over ranks, added to shard.grad; then free."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: reduce_gradient is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE
