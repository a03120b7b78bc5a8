"""The provided collectives of a Group: all_reduce, broadcast, all_gather, reduce_scatter
(the backend's native implementation) and barrier, blocking or with async_op=True.

A mixin of Group (group.py): it uses the Group's backend, context, clock and wait.
"""

from __future__ import annotations

import torch

from .backend import REDUCE_OPS
from .checks import check_rank, check_tensor, where
from .errors import CollectivesDisabledError
from .handle import CollectiveHandle


class ProvidedCollectives:
    """Collectives every Group has; a run may switch them off (launch(collectives=False))."""

    # -- collectives -------------------------------------------------------------------------
    def _collective(self, op: str, work_fn, nbytes: int, provided: bool = True, finish=None,
                    async_op: bool = False):
        """Post a collective; wait for it now, or return a CollectiveHandle (async_op=True).

        `finish` runs after the wait (e.g. the division of avg, a copy back to a strided tensor).
        """
        if provided and not self._ctx.collectives:
            raise CollectivesDisabledError(
                f"{op} on {where(self)}: the provided collectives are switched off in this run. "
                f"This homework asks you to build collectives from point-to-point messages "
                f"(send, recv, isend, irecv, sendrecv); barrier() is still allowed.")
        start = self._clock()
        self._collective_seq += 1
        work = work_fn()
        self._ctx.recorder.count(op, tensor_bytes=nbytes)
        handle = CollectiveHandle(self, work, op, self._collective_seq, nbytes, start, finish)
        return handle if async_op else handle.wait()

    def barrier(self) -> None:
        """Return once every rank of the group has called barrier()."""
        self._collective("barrier", self._backend.barrier, 0, provided=False)

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum", async_op: bool = False):
        """In place: `tensor` becomes the reduction over the group (sum, prod, max, min, avg).

        Provided collective (backend native). Same shape and dtype on every rank.
        async_op=True returns a CollectiveHandle at once: do not touch `tensor` until its
        wait(), which returns the reduced tensor. Every rank must start the group's
        collectives in the same order; they may be waited on in any order.
        """
        check_tensor(self, tensor, "all_reduce")
        if op not in REDUCE_OPS + ("avg",):
            raise ValueError(f"all_reduce on {where(self)}: op={op!r}; use one of {REDUCE_OPS + ('avg',)}")
        if op == "avg" and not (tensor.is_floating_point() or tensor.is_complex()):
            raise TypeError(f"all_reduce on {where(self)}: op='avg' needs a floating dtype, got {tensor.dtype}")
        buf = tensor if tensor.is_contiguous() else tensor.contiguous()

        def finish():
            if op == "avg":
                buf.div_(self.size)
            if buf is not tensor:
                tensor.copy_(buf)
            return tensor
        return self._collective("all_reduce", lambda: self._backend.all_reduce(buf, "sum" if op == "avg" else op),
                                buf.nbytes, finish=finish, async_op=async_op)

    def broadcast(self, tensor: torch.Tensor, src: int = 0, async_op: bool = False):
        """In place: `tensor` on every rank becomes rank `src`'s. Provided collective.

        async_op=True returns a CollectiveHandle (see all_reduce).
        """
        check_tensor(self, tensor, "broadcast")
        check_rank(self, src, "broadcast", "src", allow_self=True)
        buf = tensor if tensor.is_contiguous() else tensor.contiguous()

        def finish():
            if buf is not tensor:
                tensor.copy_(buf)
            return tensor
        return self._collective("broadcast", lambda: self._backend.broadcast(buf, src), buf.nbytes,
                                finish=finish, async_op=async_op)

    def all_gather(self, tensor: torch.Tensor, async_op: bool = False):
        """Concatenate every rank's `tensor` along dim 0, in rank order. Provided collective.

        Shapes: tensor (m, ...) on every rank -> (p*m, ...); a 0-dim tensor -> (p,).
        async_op=True returns a CollectiveHandle whose wait() returns the result.
        """
        check_tensor(self, tensor, "all_gather")
        flat = tensor.reshape(1) if tensor.dim() == 0 else tensor.contiguous()
        out = flat.new_empty((self.size * flat.shape[0], *flat.shape[1:]))
        return self._collective("all_gather", lambda: self._backend.all_gather(out, flat), flat.nbytes,
                                finish=lambda: out, async_op=async_op)

    def reduce_scatter(self, tensor: torch.Tensor, op: str = "sum", async_op: bool = False):
        """Reduce over ranks, then rank r keeps rows [r*m, (r+1)*m). Provided collective.

        Shapes: tensor (p*m, ...) on every rank -> (m, ...).
        async_op=True returns a CollectiveHandle whose wait() returns the result.
        """
        check_tensor(self, tensor, "reduce_scatter")
        if op not in REDUCE_OPS:
            raise ValueError(f"reduce_scatter on {where(self)}: op={op!r}; use one of {REDUCE_OPS}")
        if tensor.dim() == 0 or tensor.shape[0] % self.size:
            raise ValueError(f"reduce_scatter on {where(self)}: the input's first dimension "
                             f"({tuple(tensor.shape)}) must be a multiple of the group size {self.size}; "
                             f"pad it")
        buf = tensor.contiguous()
        out = buf.new_empty((buf.shape[0] // self.size, *buf.shape[1:]))
        return self._collective("reduce_scatter", lambda: self._backend.reduce_scatter(out, buf, op),
                                buf.nbytes, finish=lambda: out, async_op=async_op)
