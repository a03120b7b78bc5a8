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
        # BEGIN YOUR CODE  (HW6 task 6.1)
        raise NotImplementedError("HW6 task 6.1: __init__ is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    @property
    def param_groups(self):
        """The wrapped optimizer's param groups (an LR scheduler changes "lr" here)."""
        return self.optim.param_groups

    @property
    def state(self):
        return self.optim.state

    def reduce_gradients(self) -> None:
        """Step 1: shard.grad = this rank's shard of the mean gradient over ranks (reduce-scatter)."""
        # BEGIN YOUR CODE  (HW6 task 6.1)
        raise NotImplementedError("HW6 task 6.1: reduce_gradients is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def gather_parameters(self) -> None:
        """Step 3: every parameter takes the updated values of the shard that holds it (all-gather)."""
        # BEGIN YOUR CODE  (HW6 task 6.1)
        raise NotImplementedError("HW6 task 6.1: gather_parameters is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

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
        # BEGIN YOUR CODE  (HW6 task 6.2)
        raise NotImplementedError("HW6 task 6.2: __init__ is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def _grad_ready(self, index: int) -> None:
        """Hook: parameter `index` has its gradient; reduce its bucket once all of it is ready."""
        # BEGIN YOUR CODE  (HW6 task 6.2)
        raise NotImplementedError("HW6 task 6.2: _grad_ready is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def _reduce_bucket(self, b: int) -> None:
        """Reduce-scatter bucket b's gradients into this rank's part of shard.grad; free them."""
        # BEGIN YOUR CODE  (HW6 task 6.2)
        raise NotImplementedError("HW6 task 6.2: _reduce_bucket is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE

    def reduce_gradients(self) -> None:
        """Step 1 at step time: reduce the buckets backward did not finish (unused parameters)."""
        # BEGIN YOUR CODE  (HW6 task 6.2)
        raise NotImplementedError("HW6 task 6.2: reduce_gradients is not implemented yet (see assignments/hw6/README.md)")
        # END YOUR CODE
