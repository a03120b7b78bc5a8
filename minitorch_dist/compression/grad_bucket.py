"""Provided pieces of homework 3, task 3.5: what a communication hook receives and returns.

A hook is a function hook(state, bucket) -> Future, as torch DDP's `register_comm_hook`:

    bucket.buffer()      the bucket's gradients, flat (n,), summed over this rank's micro-batches,
                         NOT divided by p: the hook averages
    bucket.gradients()   views of buffer() shaped like the bucket's parameters, in bucket order
    bucket.parameters()  those parameters; bucket.index(); bucket.is_last() (the step's last bucket)
    Future.wait()        -> the averaged bucket, (n,) of buffer's dtype, the same on every rank

`allreduce_hook` is the plain one (what BucketedDDP does without a hook). A hook may work in place
on buffer() and return it.
"""

from __future__ import annotations

import zlib

import torch

__all__ = ["GradBucket", "Future", "allreduce_hook", "check_same_hook"]


class GradBucket:
    """One bucket of gradients handed to a hook (torch's GradBucket, the same method names)."""

    def __init__(self, index: int, params: list, num_buckets: int):
        self._index, self._params, self._num = index, list(params), num_buckets
        self._buffer = torch.cat([p.grad.reshape(-1) for p in self._params]) if self._params else torch.zeros(0)

    def index(self) -> int:
        return self._index

    def buffer(self) -> torch.Tensor:
        return self._buffer

    def parameters(self) -> list:
        return list(self._params)

    def gradients(self) -> list[torch.Tensor]:
        """Views of buffer(): writing one writes the buffer."""
        out, offset = [], 0
        for p in self._params:
            out.append(self._buffer[offset:offset + p.numel()].view(p.shape))
            offset += p.numel()
        return out

    def is_last(self) -> bool:
        """True for the last bucket of a step (the highest index)."""
        return self._index == self._num - 1


class Future:
    """What a hook returns. Future.done(t): t is ready. Future.after(handle, then): t = then(handle.wait())
    on wait (an async collective still in flight). wait() returns the tensor (once computed, kept)."""

    def __init__(self, value=None, handle=None, then=None):
        self._value, self._handle, self._then = value, handle, then

    @classmethod
    def done(cls, value: torch.Tensor) -> "Future":
        return cls(value=value)

    @classmethod
    def after(cls, handle, then=lambda t: t) -> "Future":
        return cls(handle=handle, then=then)

    def wait(self) -> torch.Tensor:
        if self._handle is not None:
            self._value, self._handle = self._then(self._handle.wait()), None
        return self._value


def allreduce_hook(group, bucket: GradBucket) -> Future:
    """The plain hook (state: the Group): buffer / p, all-reduced (sum) asynchronously."""
    flat = bucket.buffer().div_(group.size)
    return Future.after(group.all_reduce(flat, async_op=True))


def _hook_name(hook) -> str:
    return f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', type(hook).__name__)}"


def check_same_hook(group, hook) -> None:
    """ValueError on every rank when the ranks register different hooks (one all-gather of a code)."""
    name = _hook_name(hook)
    codes = group.all_gather(torch.tensor([zlib.crc32(name.encode())], dtype=torch.int64, device=group.device)).tolist()
    odd = [r for r, c in enumerate(codes) if c != codes[0]]
    if odd:
        raise ValueError(f"register_comm_hook on rank {group.rank}: ranks {odd} registered a different hook than "
                         f"rank 0 (this rank: {name}); every rank must register the same hook")
