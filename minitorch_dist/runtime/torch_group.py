"""torch.distributed's default process group over the ranks of a Group: for benchmarks and tests
that run torch's own implementations (DistributedDataParallel, its comm hooks, FSDP, pipelining)
beside the kit's, in the same processes.

    with torch_default_group(group):
        model = torch.nn.parallel.DistributedDataParallel(net)     # torch's, on gloo
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager

import torch
import torch.distributed as dist

__all__ = ["torch_default_group"]


@contextmanager
def torch_default_group(group):
    """torch.distributed's default process group (gloo) over the ranks of `group`, for this block.

    Rank 0 hosts a TCPStore on a port the OS picks (no fixed port, no race for it) and
    broadcasts the port with our own group; MASTER_ADDR names rank 0's host (default 127.0.0.1).
    """
    if dist.is_initialized():            # someone else's (e.g. under torchrun): use it as it is
        if dist.get_world_size() != group.size:
            raise RuntimeError(f"rank {group.rank}: torch.distributed is already initialised with "
                               f"{dist.get_world_size()} ranks, but the group has {group.size}")
        yield
        return
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    store = dist.TCPStore(host, 0, group.size, True, wait_for_workers=False) if group.rank == 0 else None
    port = torch.tensor([store.port if store is not None else 0], dtype=torch.int64)
    group.broadcast(port, src=0)
    if store is None:
        store = dist.TCPStore(host, int(port), group.size, False)
    dist.init_process_group("gloo", store=store, rank=group.rank, world_size=group.size)
    try:
        yield
    finally:
        gc.collect()      # what the block built is freed while the group exists: a torch DDP reducer
        dist.destroy_process_group()       # freed after it can hang its rank (about 1 run in 25)
