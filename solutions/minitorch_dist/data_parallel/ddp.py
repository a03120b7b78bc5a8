"""Homework 2, tasks 2.2 and 2.3: data parallel with all-reduce, two ways.

Both keep one full replica per rank; after backward every .grad is the mean of the ranks'
gradients (one all-reduce with op="avg" per gradient), so every replica takes the same step.

    2.2 AllReduceDDP    all-reduce every gradient after backward (no overlap).
    2.3 OverlapDDP      a hook per parameter starts that gradient's all-reduce (async_op=True) the
                        moment autograd has finished accumulating it; backward of earlier layers
                        overlaps with communication of later ones; finish waits.

    Cost per step (Psi parameters of s bytes, ring all-reduce): each rank sends and receives
    2 (p-1)/p Psi s bytes; one all-reduce per parameter tensor, so n_params * alpha latency.
"""

from __future__ import annotations

from torch import nn

from minitorch_dist.data_parallel.common import DataParallel

__all__ = ["AllReduceDDP", "OverlapDDP"]


class AllReduceDDP(DataParallel):
    """Version 1: after backward, one blocking all-reduce (op="avg") per gradient, in order.

    Parameters whose .grad is None (unused in this step on every rank) are skipped.
    """

    def finish_gradient_synchronization(self) -> None:
        # BEGIN SOLUTION  (HW2 task 2.2)
        if not self.require_sync:
            return
        for p in self.params:
            if p.grad is not None:
                self.group.all_reduce(p.grad, "avg")
        # END SOLUTION


class OverlapDDP(DataParallel):
    """Version 2: each gradient's all-reduce starts from a hook as soon as it is ready.

    Register, for every trainable parameter, `param.register_post_accumulate_grad_hook(hook)`:
    autograd calls hook(param) once param.grad holds this backward's full gradient (a tied
    weight's contributions already summed). Start `group.all_reduce(param.grad, "avg",
    async_op=True)` there (not under no_sync) and keep the handle; finish waits on them all.
    """

    def __init__(self, module: nn.Module, group):
        super().__init__(module, group)
        # BEGIN SOLUTION  (HW2 task 2.3)
        self._handles = []
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._grad_ready)
        # END SOLUTION

    def _grad_ready(self, param) -> None:
        """The hook: `param.grad` now holds this backward's gradient."""
        # BEGIN SOLUTION  (HW2 task 2.3)
        if self.require_sync:
            self._handles.append(self.group.all_reduce(param.grad, "avg", async_op=True))
        # END SOLUTION

    def finish_gradient_synchronization(self) -> None:
        # BEGIN SOLUTION  (HW2 task 2.3)
        handles, self._handles = self._handles, []
        for h in handles:
            h.wait()
        # END SOLUTION
