"""The nccl backend: one GPU per rank, the provided collectives by NCCL on the GPU.

    launch(main, 4, backend="nccl")             # group.device is cuda:rank on each rank
    torchrun --nproc-per-node 4 train.py        # launch(main, backend="nccl") in train.py

A Group on nccl owns two process groups built from the job's store: a ProcessGroupNCCL for the
provided collectives on CUDA tensors (all_reduce, all_gather, reduce_scatter, broadcast), and
the gloo backend's framed point-to-point (headers, mismatch checks, progress without a waiter)
with CUDA payloads staged through the host. NCCL's own point-to-point matches messages by order
only, with no tags, no any-source receive and no size check, so the kit's message semantics
stay on gloo; a homework's hand-written collectives measure the host path on this backend, and
the provided collectives the GPU's.

Waits: a collective's wait() polls the NCCL work until it is complete on the GPU (so the data is
there for the host and every stream), within the run's deadline, which turns into the
deadlock report like any other wait. TORCH_NCCL_ASYNC_ERROR_HANDLING is set so that a stuck or
failed communicator is torn down, and NCCL's own timeout is the deadline plus a margin.
close() shuts the communicator down when every collective it started has completed; when one is
still running (a deadlock, a dead peer) it aborts it, since a shutdown waits for the GPU's kernels
to finish and would wait forever.
CPU tensors given to a collective go through gloo, as on the gloo backend.

Untested in this kit's CI (no GPU there): tests marked `gpu` (pytest -m gpu) run it where a GPU is.
They passed on one H100 with one rank; two or more ranks (a GPU each), and so the abort above,
have never run.
"""

from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist

from ..backend import DeadlineExpired, Work
from ..devices import one_gpu_per_rank
from ..errors import PeerFailedError
from .gloo import C10D_OPS, GlooBackend

NCCL_TIMEOUT = datetime.timedelta(minutes=10)   # NCCL's watchdog: far beyond any run's deadline


class _NcclWork(Work):
    """A c10d NCCL Work, waited by polling: done means done on the GPU, not only enqueued."""

    def __init__(self, work, rank: int):
        self._work, self._rank = work, rank

    def wait(self, timeout: float | None) -> None:
        end = None if timeout is None else time.monotonic() + timeout
        nap = 1e-5
        try:
            while not self._work.is_completed():
                if end is not None and time.monotonic() > end:
                    raise DeadlineExpired("nccl collective")
                time.sleep(nap)
                nap = min(nap * 2, 1e-3)
            self._work.wait()            # raises the communicator's error, if it had one
        except RuntimeError as exc:
            raise PeerFailedError(f"rank {self._rank}: NCCL failed ({str(exc).splitlines()[0][:160]}). "
                                  f"Another rank probably crashed or was killed; its own error is the one "
                                  f"to read.") from None


def close_communicator(pg, works: list) -> str:
    """Tear the NCCL process group down: "shutdown" (waits for its kernels) when every work in
    `works` has completed, else "abort" (kills them). Returns which one it called."""
    how = "shutdown" if all(w.is_completed() for w in works) else "abort"
    try:
        getattr(pg, how)()
    except (AttributeError, RuntimeError):
        pass
    return how


class NcclBackend(GlooBackend):
    """Collectives on CUDA tensors by NCCL; point-to-point framed over gloo (gloo.py)."""

    name = "nccl"

    def __init__(self, store, rank: int, size: int, world_ranks: tuple[int, ...], key: str,
                 pg_timeout: float | None = None, device: torch.device | None = None):
        super().__init__(store, rank, size, world_ranks, key, pg_timeout, device)
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = NCCL_TIMEOUT
        self._nccl = dist.ProcessGroupNCCL(dist.PrefixStore(f"nccl/{key}", store), rank, size, options)
        self._started: list = []        # its works not yet seen complete (close() aborts if one runs)

    @classmethod
    def world(cls, store, rank: int, size: int, key: str, device=None) -> "NcclBackend":
        return cls(store, rank, size, tuple(range(size)), key, device=one_gpu_per_rank(rank, size))

    def _on_gpu(self, *tensors) -> bool:
        return all(t.is_cuda for t in tensors)

    def _work(self, work) -> _NcclWork:
        self._started = [w for w in self._started if not w.is_completed()] + [work]
        return _NcclWork(work, self.rank)

    def all_reduce(self, tensor, op):
        if not self._on_gpu(tensor) or tensor.numel() == 0:
            return super().all_reduce(tensor, op)
        opts = dist.AllreduceOptions()
        opts.reduceOp = C10D_OPS[op]
        return self._work(self._nccl.allreduce([tensor], opts))

    def reduce_scatter(self, out, tensor, op):
        if not self._on_gpu(out, tensor) or tensor.numel() == 0:
            return super().reduce_scatter(out, tensor, op)
        opts = dist.ReduceScatterOptions()
        opts.reduceOp = C10D_OPS[op]
        return self._work(self._nccl._reduce_scatter_base(out, tensor.contiguous(), opts))

    def all_gather(self, out, tensor):
        if not self._on_gpu(out, tensor) or tensor.numel() == 0:
            return super().all_gather(out, tensor)
        return self._work(self._nccl._allgather_base(out, tensor.contiguous()))

    def broadcast(self, tensor, src):
        if not self._on_gpu(tensor) or tensor.numel() == 0:
            return super().broadcast(tensor, src)
        opts = dist.BroadcastOptions()
        opts.rootRank = src
        return self._work(self._nccl.broadcast([tensor], opts))

    def close(self):
        if getattr(self, "_nccl", None) is not None:
            close_communicator(self._nccl, self._started)
            self._nccl, self._started = None, []
        super().close()
