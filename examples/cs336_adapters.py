"""Run Stanford CS336 assignment 2's distributed tests against your homework 2 and 6 code.

CS336's tests (tests/test_ddp.py, tests/test_sharded_optimizer.py, tests/test_fsdp.py in
github.com/stanford-cs336/assignment2-systems) start their ranks with torch.multiprocessing and
torch.distributed.init_process_group("gloo"), then call the functions of their tests/adapters.py.
Each function below is one of those, written over this kit: world_group() turns the process's
torch job into a Group, and your classes do the rest. To use it, in a checkout of that repository:

    # tests/adapters.py: replace each function's body by a call to the one here, e.g.
    #     from cs336_adapters import get_ddp; return get_ddp(module)
    PYTHONPATH=/path/to/this/kit:/path/to/this/kit/examples uv run pytest tests/test_ddp.py

It tests your code (the kit's minitorch_dist/, homework 2's OverlapDDP, homework 6's ZeroOptimizer
and FullyShardedModel). What it showed with the kit's reference: every DDP and sharded-optimizer
case and FSDP's mixed-precision and gradient-sync cases pass; float32 FSDP compared bit for bit
with one process after a step differs in the last bits, as torch's own DDP does behind the same
adapter (the order of the additions, not the algorithm).

FSDP here: one unit per Linear and Embedding (CS336's rule for what is sharded); every other
trainable parameter (the norms) is named in replicate=: kept whole on every rank, its gradient
averaged. A sharded weight leaves its module; fsdp.local_shard(name) shows this rank's piece.
"""

from __future__ import annotations

import torch
from torch import nn

from minitorch_dist import world_group
from minitorch_dist.data_parallel import OverlapDDP
from minitorch_dist.sharded import FullyShardedModel, ZeroOptimizer
from minitorch_dist.sharded.policy import make_unit

SHARDED_MODULES = ("Linear", "Embedding")       # by class name: CS336's own classes and torch's


def get_ddp(module: nn.Module) -> nn.Module:
    return OverlapDDP(module, world_group())


def ddp_on_after_backward(ddp_model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    ddp_model.finish_gradient_synchronization()


def get_sharded_optimizer(params, optimizer_cls: type[torch.optim.Optimizer], **kwargs) -> torch.optim.Optimizer:
    return ZeroOptimizer(params, optimizer_cls, world_group(), **kwargs)


def get_fsdp(module: nn.Module, compute_dtype: torch.dtype | None = None) -> nn.Module:
    units = [make_unit(name, m) for name, m in module.named_modules()
             if type(m).__name__ in SHARDED_MODULES and any(q.requires_grad for q in m.parameters(recurse=False))]
    taken = {id(s.param) for u in units for s in u.slots}
    rest = [n for n, q in module.named_parameters() if q.requires_grad and id(q) not in taken]
    return FullyShardedModel(module, world_group(), compute_dtype=compute_dtype, units=units, replicate=rest)


def fsdp_on_after_backward(fsdp_model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    pass                        # the gradients were reduce-scattered (and averaged) during backward


def fsdp_gather_full_params(fsdp_model: nn.Module) -> dict[str, torch.Tensor]:
    return fsdp_model.full_parameters()
