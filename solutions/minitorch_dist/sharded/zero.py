"""Homework 6, tasks 6.1 and 6.2: ZeRO-1 and ZeRO-2, sharded optimizers for data parallelism.

    opt = ZeroOptimizer(model.parameters(), torch.optim.AdamW, group, lr=1e-3)     # 6.1 (ZeRO-1)
    opt = Zero2Optimizer(model.parameters(), torch.optim.AdamW, group, lr=1e-3)    # 6.2 (ZeRO-2)
    loss = model(x_local).mean(); loss.backward(); opt.step(); opt.zero_grad()

Every rank holds the whole model and runs forward and backward on its own part of the batch,
as in DDP. The trainable parameters are flattened into one buffer, padded to a multiple of p,
and cut into p equal shards (minitorch_dist.sharded.flat): rank r owns shard r, a balanced
part of every element. The wrapped optimizer (any element-wise torch optimizer: SGD, Adam,
AdamW, ...) steps only on the rank's shard, a float tensor `self.shard`, so its state is 1/p of
DDP's. A step:
    1. reduce-scatter the flat gradient: rank r gets the sum of shard r over ranks, / p (the mean);
    2. the wrapped optimizer steps on the shard;
    3. all-gather the updated shards and copy them into every parameter.
Cost per step: reduce-scatter + all-gather of the padded Psi elements: the 2 Psi (p-1)/p bytes per
rank of a ring all-reduce (DDP), no more.
ZeRO-2 also shards the gradients: during backward, as soon as every gradient of a bucket is
ready, the bucket is reduce-scattered into the rank's gradient shard and the full gradients are
freed (param.grad = None), so a rank never keeps more than a bucket of full gradients.

At construction every rank takes rank 0's parameters (a broadcast), so ranks that started from
different random weights train one model. Frozen parameters (requires_grad False) are left out.
Buffers go on the parameters' device, group.device (a GPU on backend nccl): FlatLayout.flatten(...,
device=self.shard.device) when every gradient of a bucket may be None.
"""

from __future__ import annotations

import torch

from minitorch_dist.sharded.flat import ShardedLayout, buckets_by_size

__all__ = ["ZeroOptimizer", "Zero2Optimizer", "trainable_params"]


def trainable_params(params) -> list[torch.Tensor]:
    """The distinct tensors of `params` (a tied weight once) that require grad, in order."""
    if isinstance(params, torch.Tensor):
        raise TypeError("a sharded optimizer takes an iterable of parameters (model.parameters()), "
                        "not one tensor; wrap it in a list")
    out, seen = [], set()
    for prm in params:
        if isinstance(prm, dict):
            raise TypeError("parameter groups (dicts) are not supported by the sharded optimizers; "
                            "pass model.parameters()")
        if not isinstance(prm, torch.Tensor):
            raise TypeError(f"a sharded optimizer's params must be tensors; got {type(prm).__name__}")
        if prm.requires_grad and id(prm) not in seen:
            seen.add(id(prm))
            out.append(prm)
    if not out:
        raise ValueError("a sharded optimizer got no parameter that requires grad")
    return out


class ZeroOptimizer:
    """ZeRO-1: optimizer state sharded over the group; gradients and parameters replicated.

    Built like torch.distributed.optim.ZeroRedundancyOptimizer: (params, optimizer_class, group,
    **kwargs for optimizer_class). Attributes: `optim` (the wrapped optimizer, stepping on
    `shard`), `shard` (this rank's flat float shard of the parameters, an nn.Parameter),
    `layout` (a ShardedLayout of the trainable parameters), `params`, `group`, `flat`.
    Memory: with one bucket (ZeRO-1's default) the parameters become views of one padded flat
    buffer `flat` and `shard` is a view of this rank's chunk of it: no copy of the shard, and the
    step updates this rank's part of the parameters in place. With several buckets (ZeRO-2) a
    rank's shard is not contiguous in such a buffer: `shard` is a copy and `flat` is None.
    """

    def __init__(self, params, optimizer_class, group, buckets: list[list[int]] | None = None, **kwargs):
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, torch.optim.Optimizer)):
            raise TypeError(f"optimizer_class must be a torch.optim.Optimizer subclass (torch.optim.AdamW), "
                            f"got {optimizer_class!r}")
        self.group, self.params = group, trainable_params(params)
        self.layout = ShardedLayout([q.shape for q in self.params], group.size, buckets)
        # BEGIN SOLUTION  (HW6 task 6.1)
        with torch.no_grad():
            for prm in self.params:                              # rank 0's weights everywhere
                group.broadcast(prm.data, src=0)
        self.flat = None
        if len(self.layout.buckets) == 1:                        # ZeRO-1: no copy of the shard
            idx, lay = self.layout.buckets[0], self.layout.layouts[0]
            self.flat = lay.flatten([self.params[i].detach() for i in idx])      # (padded,)
            for i, view in zip(idx, lay.views(self.flat)):
                self.params[i].data = view                       # the parameters live in flat
            shard = lay.chunk(self.flat, group.rank)             # a view: the step updates them in place
        else:
            shard = self.layout.shard_of([q.detach() for q in self.params], group.rank)
        self.shard = torch.nn.Parameter(shard)                   # (shard_numel,)
        self.optim = optimizer_class([self.shard], **kwargs)
        # END SOLUTION

    @property
    def param_groups(self):
        """The wrapped optimizer's param groups (an LR scheduler changes "lr" here)."""
        return self.optim.param_groups

    @property
    def state(self):
        return self.optim.state

    def reduce_gradients(self) -> None:
        """Step 1: shard.grad = this rank's shard of the mean gradient over ranks (reduce-scatter)."""
        # BEGIN SOLUTION  (HW6 task 6.1)
        grad = torch.zeros_like(self.shard)
        for b, lay in enumerate(self.layout.layouts):
            grads = [self.params[i].grad for i in self.layout.buckets[b]]
            flat = lay.flatten(grads, self.shard.dtype, self.shard.device)
            self.layout.bucket_shard(grad, b).copy_(self.group.reduce_scatter(flat))
        self.shard.grad = grad.div_(self.group.size)
        # END SOLUTION

    def gather_parameters(self) -> None:
        """Step 3: every parameter takes the updated values of the shard that holds it (all-gather)."""
        # BEGIN SOLUTION  (HW6 task 6.1)
        gathered = self.group.all_gather(self.shard.detach())
        with torch.no_grad():
            if self.flat is not None:                            # one bucket: the gather is flat's layout
                self.flat.copy_(gathered)
                return
            for prm, full in zip(self.params, self.layout.unshard(gathered)):
                prm.copy_(full)
        # END SOLUTION

    def step(self, closure=None):
        """One optimizer step: reduce-scatter gradients, step on the shard, all-gather parameters."""
        if closure is not None:
            raise ValueError("a sharded optimizer's step takes no closure: run forward and backward first")
        self.reduce_gradients()
        self.optim.step()
        self.shard.grad = None                                   # its bytes are not needed until the next step
        self.gather_parameters()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every gradient (the parameters' and the shard's)."""
        for prm in self.params:
            prm.grad = None
        self.shard.grad = None


class Zero2Optimizer(ZeroOptimizer):
    """ZeRO-2: as ZeroOptimizer, and gradients reduce-scattered during backward into a shard.

    Parameters are cut into buckets of about `bucket_numel` elements in backward order
    (buckets_by_size); when the last gradient of a bucket has been accumulated (a
    post-accumulate-grad hook on each parameter), the bucket is reduce-scattered into this
    rank's part of `shard.grad` (the mean over ranks) and the bucket's param.grad are set to None.
    Attributes as ZeroOptimizer, plus `hooks` (the hook handles).
    """

    def __init__(self, params, optimizer_class, group, bucket_numel: int = 4096, **kwargs):
        params = trainable_params(params)
        if bucket_numel < 1:
            raise ValueError(f"bucket_numel must be >= 1, got {bucket_numel}")
        buckets = buckets_by_size([q.numel() for q in params], bucket_numel)
        super().__init__(params, optimizer_class, group, buckets=buckets, **kwargs)
        self.hooks = []
        # BEGIN SOLUTION  (HW6 task 6.2)
        self._bucket_of = {i: b for b, idx in enumerate(self.layout.buckets) for i in idx}
        self._ready = [0] * len(self.layout.buckets)
        self._reduced = [False] * len(self.layout.buckets)
        for i, prm in enumerate(self.params):
            self.hooks.append(prm.register_post_accumulate_grad_hook(lambda _p, i=i: self._grad_ready(i)))
        # END SOLUTION

    def _grad_ready(self, index: int) -> None:
        """Hook: parameter `index` has its gradient; reduce its bucket once all of it is ready."""
        # BEGIN SOLUTION  (HW6 task 6.2)
        b = self._bucket_of[index]
        self._ready[b] += 1
        if self._ready[b] % len(self.layout.buckets[b]) == 0:      # (again for each accumulated backward)
            self._reduce_bucket(b)
        # END SOLUTION

    def _reduce_bucket(self, b: int) -> None:
        """Reduce-scatter bucket b's gradients into this rank's part of shard.grad; free them."""
        # BEGIN SOLUTION  (HW6 task 6.2)
        idx, lay = self.layout.buckets[b], self.layout.layouts[b]
        flat = lay.flatten([self.params[i].grad for i in idx], self.shard.dtype, self.shard.device)
        mine = self.group.reduce_scatter(flat).div_(self.group.size)
        if self.shard.grad is None:
            self.shard.grad = torch.zeros_like(self.shard)
        self.layout.bucket_shard(self.shard.grad, b).add_(mine)
        for i in idx:
            self.params[i].grad = None
        self._reduced[b] = True
        # END SOLUTION

    def reduce_gradients(self) -> None:
        """Step 1 at step time: reduce the buckets backward did not finish (unused parameters)."""
        # BEGIN SOLUTION  (HW6 task 6.2)
        for b in range(len(self.layout.buckets)):
            if not self._reduced[b]:
                self._reduce_bucket(b)
        self._ready = [0] * len(self.layout.buckets)
        self._reduced = [False] * len(self.layout.buckets)
        # END SOLUTION
