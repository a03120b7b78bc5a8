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
        # BEGIN SOLUTION  (HW6 task 6.3)
        with torch.no_grad():
            flat = self.layout.flatten([s.param.detach() for s in spec.slots])
            group.broadcast(flat, src=0)                         # rank 0's weights on every rank
        self.shard = nn.Parameter(self.layout.chunk(flat, group.rank).clone())   # (padded / p,)
        self.compute_dtype = compute_dtype or self.shard.dtype
        self.mixed = self.compute_dtype != self.shard.dtype
        self.full = torch.empty(self.layout.padded, dtype=self.compute_dtype, device=flat.device, requires_grad=True)
        self._full_bytes = self.full.untyped_storage().nbytes()
        self.full.untyped_storage().resize_(0)
        for slot in spec.slots:                                  # the modules stop owning them
            for module, attr in slot.uses:
                del module._parameters[attr]
                setattr(module, attr, torch.empty(0, dtype=self.compute_dtype, device=flat.device))
        # END SOLUTION

    def start_gather(self) -> None:
        """Post the all-gather of the shard (async) unless gathered or already posted."""
        # BEGIN SOLUTION  (HW6 task 6.3)
        if self.gathered or self.handle is not None:
            return
        payload = self.compute_copy() if self.mixed else self.shard.detach()
        self.handle = self.group.all_gather(payload, async_op=True)
        # END SOLUTION

    def gather(self) -> None:
        """Make `full` hold every rank's shard (waits for a posted all-gather, or does one now)."""
        # BEGIN SOLUTION  (HW6 task 6.3)
        if self.gathered:
            return
        self.start_gather()
        gathered = self.handle.wait()                            # (padded,)
        self.handle = None
        self.full.untyped_storage().resize_(self._full_bytes)
        self.full.data.copy_(gathered)                           # no version bump: saved views stay valid
        self.gathered = True
        # END SOLUTION

    def use_full_views(self) -> None:
        """Point every module attribute of the unit at its view of `full` (call after gather())."""
        # BEGIN SOLUTION  (HW6 task 6.3)
        for slot, view in zip(self.spec.slots, self.layout.views(self.full)):
            for module, attr in slot.uses:
                setattr(module, attr, view)
        # END SOLUTION

    def free(self) -> None:
        """Drop the gathered parameters: `full`'s storage back to 0 bytes."""
        # BEGIN SOLUTION  (HW6 task 6.3)
        self.full.untyped_storage().resize_(0)
        self.gathered = False
        # END SOLUTION

    def compute_copy(self) -> torch.Tensor:
        """Mixed precision: the shard in the compute dtype, what the all-gather sends (a new tensor)."""
        # BEGIN SOLUTION  (HW6 task 6.5)
        return self.shard.detach().to(self.compute_dtype)
        # END SOLUTION

    def master_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        """Mixed precision: the full gradient (compute dtype) in the shard's dtype, for the reduce-scatter."""
        # BEGIN SOLUTION  (HW6 task 6.5)
        return grad.to(self.shard.dtype)
        # END SOLUTION

    def reduce_gradient(self) -> None:
        """full.grad -> this rank's shard of the mean over ranks, added to shard.grad; then free."""
        # BEGIN SOLUTION  (HW6 task 6.3)
        grad = self.master_gradient(self.full.grad) if self.mixed else self.full.grad   # (padded,)
        self.full.grad = None
        mine = self.group.reduce_scatter(grad).div_(self.group.size)
        self.shard.grad = mine if self.shard.grad is None else self.shard.grad + mine
        self.free()
        # END SOLUTION
