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
Frozen parameters and buffers are not sharded: every rank keeps rank 0's copy. A trainable parameter
in no unit must be named in `replicate` (it is then kept whole on every rank, rank 0's copy, in its
own dtype also with compute_dtype, and its gradient is averaged over every rank when autograd has
accumulated it), else construction raises.
A sharded parameter leaves its module (the unit's flat shard holds it): local_shard(name) gives this
rank's piece of it and of its gradient.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint as checkpoint_fn

from minitorch_dist.sharded.flat_unit import FlatParamUnit
from minitorch_dist.sharded.policy import left_out, transformer_units

__all__ = ["FullyShardedModel", "LocalShard"]


class LocalShard(NamedTuple):
    """This rank's piece of one parameter: `data` and `grad` (None before a backward) are 1-D views of
    the unit's shard and of its gradient, holding the parameter's flattened elements start ..
    start + data.numel() - 1 (empty where the parameter lies in other ranks' shards)."""

    data: torch.Tensor
    grad: torch.Tensor | None
    start: int


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
    unit last), shards (nn.ParameterList of every unit's shard: what .parameters() yields, with
    the frozen and replicated parameters the module still holds), replicated ([(name, parameter)]
    kept whole, named in `replicate`), prefetch, checkpoint, compute_dtype.
    """

    def __init__(self, model: nn.Module, group, prefetch: bool = False, checkpoint: bool = False,
                 compute_dtype: torch.dtype | None = None, units=None, replicate=()):
        super().__init__()
        if compute_dtype is not None and not compute_dtype.is_floating_point:
            raise ValueError(f"compute_dtype must be a floating dtype (torch.bfloat16), got {compute_dtype}")
        self.module, self.group = model, group
        self.prefetch, self.checkpoint, self.compute_dtype = prefetch, checkpoint, compute_dtype
        specs = units if units is not None else transformer_units(model)
        self.replicated = left_out(model, specs, replicate)             # raises for one not named
        self._names = [n for n, _ in model.named_parameters()]          # the dense names, tied once
        name_of = {id(q): n for n, q in model.named_parameters()}
        self._slot_of = {name_of[id(slot.param)]: (k, j) for k, spec in enumerate(specs)
                         for j, slot in enumerate(spec.slots) if id(slot.param) in name_of}
        self._hooks = []
        with torch.no_grad():                                           # replicated: rank 0's copy
            for t in [q for s in specs for q in s.frozen] + list(model.buffers()) + [q for _, q in self.replicated]:
                group.broadcast(t.data, src=0)
        for _, prm in self.replicated:
            self._hooks.append(prm.register_post_accumulate_grad_hook(self.average_replicated))
        self.units = [self.new_unit(spec, compute_dtype) for spec in specs]
        self.shards = nn.ParameterList([u.shard for u in self.units])
        self._order = [len(self.units) - 1] + list(range(len(self.units) - 1))   # forward order: outer first
        if self.units and compute_dtype is not None:
            self.cast_replicated()
        # BEGIN SOLUTION  (HW6 task 6.3)
        for k, unit in enumerate(self.units):
            self._hooks.append(unit.spec.module.register_forward_pre_hook(lambda m, a, k=k: self.before_forward(k)))
            self._hooks.append(unit.spec.module.register_forward_hook(lambda m, a, out, k=k: self.after_forward(k, out)))
            self._hooks.append(unit.full.register_post_accumulate_grad_hook(lambda full, u=unit: u.reduce_gradient()))
        # END SOLUTION
        if checkpoint:
            self.wrap_checkpointing()

    def average_replicated(self, prm: torch.Tensor) -> None:
        """A replicated parameter's gradient is accumulated: average it over every rank (the whole
        group; HSDP's world). Accumulation stays right: what was there is already equal everywhere."""
        getattr(self, "world", self.group).all_reduce(prm.grad, "avg")

    def local_shard(self, name: str) -> LocalShard:
        """This rank's piece of parameter `name` (as model.named_parameters() named it) and of its
        gradient. A frozen or replicated parameter (still in its module) is whole: its flat view."""
        if name not in self._slot_of:
            prm = dict(self.module.named_parameters()).get(name)
            if prm is None:
                raise KeyError(f"local_shard: no parameter {name!r}; the names are {self._names}")
            return LocalShard(prm.detach().view(-1), None if prm.grad is None else prm.grad.view(-1), 0)
        k, j = self._slot_of[name]
        unit, rank = self.units[k], self.group.rank
        lay = unit.layout
        first, size = rank * lay.chunk_numel, lay.chunk_numel
        lo = min(max(lay.offsets[j], first), first + size)
        hi = max(min(lay.offsets[j] + lay.numels[j], first + size), lo)
        grad = unit.shard.grad
        start = min(max(lo - lay.offsets[j], 0), lay.numels[j])
        return LocalShard(unit.shard.detach()[lo - first:hi - first],
                          None if grad is None else grad[lo - first:hi - first], start)

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
        # BEGIN SOLUTION  (HW6 task 6.3)
        unit = self.units[index]
        unit.gather()
        unit.use_full_views()
        nxt = self._next(index, backward=False)
        if self.prefetch and nxt is not None:
            self.units[nxt].start_gather()
        # END SOLUTION

    def after_forward(self, index: int, output):
        """Post-hook of unit `index`: free it, wrap the output so its backward gathers it again."""
        # BEGIN SOLUTION  (HW6 task 6.3)
        self.units[index].free()
        if isinstance(output, torch.Tensor) and output.requires_grad:
            return _PreBackward.apply(output, self, index)
        return output
        # END SOLUTION

    def before_backward(self, index: int) -> None:
        """Unit `index`'s backward is next: gather it; with prefetch, post the next unit's gather."""
        # BEGIN SOLUTION  (HW6 task 6.3)
        self.units[index].gather()
        nxt = self._next(index, backward=True)
        if self.prefetch and nxt is not None:
            self.units[nxt].start_gather()
        # END SOLUTION

    def wrap_checkpointing(self) -> None:
        """6.4: every block unit's forward runs under non-reentrant activation checkpointing."""
        # BEGIN SOLUTION  (HW6 task 6.4)
        for unit in self.units:
            module = unit.spec.module
            if module is self.module:
                continue                                         # the outer unit: the model itself
            inner = module.forward
            module.forward = lambda *a, inner=inner, **k: checkpoint_fn(inner, *a, use_reentrant=False, **k)
        # END SOLUTION

    def cast_replicated(self) -> None:
        """6.5: frozen parameters and floating buffers (replicated) into the compute dtype."""
        # BEGIN SOLUTION  (HW6 task 6.5)
        with torch.no_grad():
            for unit in self.units:
                for prm in unit.spec.frozen:
                    prm.data = prm.data.to(self.compute_dtype)
            for buf in self.module.buffers():
                if buf.is_floating_point():
                    buf.data = buf.data.to(self.compute_dtype)
        # END SOLUTION

    def full_parameters(self) -> dict:
        """6.5: {dense name: full tensor in the shards' dtype} on every rank (all-gathers the shards),
        frozen parameters included; names as model.named_parameters() gives them (a tied weight once)."""
        # BEGIN SOLUTION  (HW6 task 6.5)
        out = {}
        for unit in self.units:
            gathered = self.group.all_gather(unit.shard.detach())       # (padded,), master dtype
            start = "" if unit.spec.module is self.module else unit.spec.name + "."
            for slot, view in zip(unit.spec.slots, unit.layout.views(gathered)):
                out[start + slot.name] = view.clone()
        for name, prm in self.module.named_parameters():                # the frozen ones
            out.setdefault(name, prm.detach().to(self.units[0].shard.dtype).clone())
        return {n: out[n] for n in self._names if n in out}
        # END SOLUTION
