"""Homework 3, task 3.5: compressed data parallel, a communication hook on bucketed DDP.

HookedDDP is homework 2's BucketedDDP (the reference, shipped with this homework) with one change:
a bucket that is ready goes through a hook instead of the plain all-reduce, as with torch DDP's
`register_comm_hook`:

    model = HookedDDP(net, group, bucket_size_mb=1.0)
    model.register_comm_hook(CompressionState(group, TopK(50), error_feedback=True), compression_hook)
    model.register_comm_hook(PowerSGDState(group, matrix_approximation_rank=2), powersgd_hook)  # or this
    loss_fn(model(x), y).backward(); model.finish_gradient_synchronization(); optimizer.step()

The hook gets a GradBucket (grad_bucket.py) whose buffer holds the summed, undivided gradients, and
returns a Future of the averaged bucket; BucketedDDP's finish then makes each .grad a view of its
slice, as before. Every compressor of tasks 3.1-3.4 plugs in.

Cost per step: the hook's (compression_hook: the compressor's payload per bucket and rank, instead
of 2 (p-1)/p n s bytes for the ring all-reduce of n elements).
"""

from __future__ import annotations

from minitorch_dist.compression.error_feedback import ErrorFeedback
from minitorch_dist.compression.grad_bucket import Future, GradBucket, allreduce_hook, check_same_hook
from minitorch_dist.data_parallel.bucketed import BucketedDDP

__all__ = ["HookedDDP", "CompressionState", "compression_hook"]


class CompressionState:
    """The state of compression_hook: the Group, a compressor (task 3.1 or 3.2) and, with
    error_feedback=True, an ErrorFeedback around it (one residual per bucket: key f"bucket{index}")."""

    def __init__(self, group, compressor, error_feedback: bool = False):
        self.group, self.compressor = group, compressor
        self.ef = ErrorFeedback(compressor) if error_feedback else None


def compression_hook(state: CompressionState, bucket: GradBucket) -> Future:
    """The bucket averaged over ranks through the state's compressor (with error feedback if on).

    Shapes: bucket.buffer() (n,) -> a done Future of (n,), the same on every rank.
    Steps: without error feedback, compressor.aggregate(compressor.compress(buffer), n, dtype, group,
    "avg"); with it, state.ef.all_reduce(f"bucket{bucket.index()}", buffer, group, "avg").
    Cost: the compressor's payload per rank (e.g. TopK: (p-1) k (s + 4) bytes sent).
    """
    # BEGIN YOUR CODE  (HW3 task 3.5)
    raise NotImplementedError("HW3 task 3.5: compression_hook is not implemented yet (see assignments/hw3/README.md)")
    # END YOUR CODE


class HookedDDP(BucketedDDP):
    """BucketedDDP whose buckets go through a communication hook (allreduce_hook until one is
    registered). Needs homework 2's reference BucketedDDP: its _grad_ready calls _start(b) when
    bucket b is full, and its finish waits on self._pending[b] = (handle, flat, members) and then
    makes each .grad a view of `flat`."""

    def __init__(self, module, group, bucket_size_mb: float = 25.0):
        super().__init__(module, group, bucket_size_mb)
        self._state, self._hook = group, allreduce_hook

    def register_comm_hook(self, state, hook) -> None:
        """Use hook(state, bucket) -> Future for every bucket from now on; once per model, the same
        hook on every rank (checked: one all-gather)."""
        if self._hook is not allreduce_hook:
            raise RuntimeError(f"register_comm_hook on rank {self.group.rank}: a hook is already registered "
                               "(one per model, as with torch DDP)")
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable as hook(state, bucket), got {hook!r}")
        check_same_hook(self.group, hook)
        self._state, self._hook = state, hook

    def _start(self, b: int) -> None:
        """Bucket b's ready gradients through the hook; the Future's result lands in the bucket's buffer.

        Steps: members = the ready parameters of bucket b, in bucket order; bucket = GradBucket(b,
        their params, number of buckets); future = hook(state, bucket); self._pending[b] = (an object
        whose wait() copies future.wait() into bucket.buffer(), bucket.buffer(), members) (finish
        waits on it, then uses the buffer: Future.after(future, then=...) does it).
        """
        # BEGIN YOUR CODE  (HW3 task 3.5)
        raise NotImplementedError("HW3 task 3.5: _start is not implemented yet (see assignments/hw3/README.md)")
        # END YOUR CODE
