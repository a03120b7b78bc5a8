"""Homework 6, tasks 6.3 to 6.5: FSDP (ZeRO-3), a model whose parameters live as shards.

    fsdp = FullyShardedModel(model, group, prefetch=True, checkpoint=True, compute_dtype=None)
    opt = torch.optim.AdamW(fsdp.parameters(), lr=1e-3)       # the shards are its parameters
    loss = F.cross_entropy(fsdp(idx).flatten(0, 1).float(), targets.flatten())
    loss.backward(); opt.step(); opt.zero_grad()
    full = fsdp.full_parameters()                              # 6.5: {name: float32 tensor}, every rank

Units (policy.transformer_units): one FlatParamUnit per block, and the outer unit (embeddings, the
tied LM head, the final norm) bracketed by the whole model's forward. Forward of a unit:
    1. pre-hook: gather the unit (wait for its prefetch), point its modules at the full views;
       with prefetch, post the all-gather of the next unit in forward order (async);
    2. the module's own forward;
    3. post-hook: free the unit (the outer unit: after the whole model), and wrap the output in
       _PreBackward, whose backward gathers the unit again (and, with prefetch, posts the
       all-gather of the next unit in backward order) before the unit's backward runs;
    4. when autograd has accumulated the unit's full gradient (a post-accumulate-grad hook on
       unit.full), reduce-scatter it into the shard's gradient and free the unit.
Checkpointing (6.4): each block's forward runs under torch.utils.checkpoint (non-reentrant):
its activations are recomputed during backward, while the unit is gathered again.
Frozen parameters and buffers are not sharded: every rank keeps rank 0's copy.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint as checkpoint_fn

from minitorch_dist.sharded.flat_unit import FlatParamUnit
from minitorch_dist.sharded.policy import transformer_units

__all__ = ["FullyShardedModel"]


class _PreBackward(torch.autograd.Function):
    """forward: identity | backward: gather the unit (and prefetch the next one) before its backward."""

    @staticmethod
    def forward(ctx, x, fsdp, index):
        ctx.fsdp, ctx.index = fsdp, index
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.fsdp.before_backward(ctx.index)
        return grad, None, None


class FullyShardedModel(nn.Module):
    """FSDP of a model with `blocks` (CharTransformer): flat-parameter units, sharded over `group`.

    Attributes: module (the wrapped model), units (FlatParamUnit, the blocks in order, the outer
    unit last), shards (nn.ParameterList of every unit's shard: what .parameters() yields),
    prefetch, checkpoint, compute_dtype.
    """

    def __init__(self, model: nn.Module, group, prefetch: bool = False, checkpoint: bool = False,
                 compute_dtype: torch.dtype | None = None, units=None):
        super().__init__()
        if compute_dtype is not None and not compute_dtype.is_floating_point:
            raise ValueError(f"compute_dtype must be a floating dtype (torch.bfloat16), got {compute_dtype}")
        self.module, self.group = model, group
        self.prefetch, self.checkpoint, self.compute_dtype = prefetch, checkpoint, compute_dtype
        specs = units if units is not None else transformer_units(model)
        self._names = [n for n, _ in model.named_parameters()]          # the dense names, tied once
        self._hooks = []
        with torch.no_grad():                                           # replicated: rank 0's copy
            for t in [q for s in specs for q in s.frozen] + list(model.buffers()):
                group.broadcast(t.data, src=0)
        self.units = [self.new_unit(spec, compute_dtype) for spec in specs]
        self.shards = nn.ParameterList([u.shard for u in self.units])
        self._order = [len(self.units) - 1] + list(range(len(self.units) - 1))   # forward order: outer first
        if self.units and compute_dtype is not None:
            self.cast_replicated()
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: __init__ is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE
        if checkpoint:
            self.wrap_checkpointing()

    def new_unit(self, spec, compute_dtype):
        """The FlatParamUnit of one policy Unit, sharded over self.group (HSDP, 6.6, makes its own)."""
        return FlatParamUnit(spec, self.group, compute_dtype)

    def forward(self, *args, **kwargs):
        """The wrapped model's forward (the outer unit's hooks bracket it)."""
        return self.module(*args, **kwargs)

    def _next(self, index: int, backward: bool) -> int | None:
        """The unit after `index` in forward order (outer, blocks...) or in backward order (reverse)."""
        order = [self._order[0]] + self._order[:0:-1] if backward else self._order
        pos = order.index(index) + 1
        return order[pos] if pos < len(order) else None

    def before_forward(self, index: int) -> None:
        """Pre-hook of unit `index`: gather it, use its views; with prefetch, post the next one's gather."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: before_forward is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def after_forward(self, index: int, output):
        """Post-hook of unit `index`: free it, wrap the output so its backward gathers it again."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: after_forward is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def before_backward(self, index: int) -> None:
        """Unit `index`'s backward is next: gather it; with prefetch, post the next unit's gather."""
        # BEGIN YOUR CODE  (HW6 task 6.3)
        raise NotImplementedError("HW6 task 6.3: before_backward is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def wrap_checkpointing(self) -> None:
        """6.4: every block unit's forward runs under non-reentrant activation checkpointing."""
        # BEGIN YOUR CODE  (HW6 task 6.4)
        raise NotImplementedError("HW6 task 6.4: wrap_checkpointing is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def cast_replicated(self) -> None:
        """6.5: frozen parameters and floating buffers (replicated) into the compute dtype."""
        # BEGIN YOUR CODE  (HW6 task 6.5)
        raise NotImplementedError("HW6 task 6.5: cast_replicated is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def full_parameters(self) -> dict:
        """6.5: {dense name: full tensor in the shards' dtype} on every rank (all-gathers the shards),
        frozen parameters included; names as model.named_parameters() gives them (a tied weight once)."""
        # BEGIN YOUR CODE  (HW6 task 6.5)
        raise NotImplementedError("HW6 task 6.5: full_parameters is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE
