"""torch.distributed's default process group over the ranks of a Group: for benchmarks and tests
that run torch's own implementations (DistributedDataParallel, its comm hooks, FSDP, pipelining)
beside the kit's, in the same processes.

    with torch_default_group(group):
        model = torch.nn.parallel.DistributedDataParallel(net)     # torch's, on gloo
"""

from __future__ import annotations

import gc
import os
import socket
from contextlib import contextmanager

import torch
import torch.distributed as dist

__all__ = ["torch_default_group"]


@contextmanager
def torch_default_group(group):
    """torch.distributed's default process group (gloo) over the ranks of `group`, for this block.

    Rank 0 hosts a TCPStore on a port the OS picks (no fixed port, no race for it) and
    broadcasts the port and its hostname with our own group; MASTER_ADDR names rank 0's host.
    Without MASTER_ADDR (mpirun sets none), a rank on rank 0's host connects to 127.0.0.1 and a
    rank on another node to rank 0's hostname.
    """
    if dist.is_initialized():            # someone else's (e.g. under torchrun): use it as it is
        if dist.get_world_size() != group.size:
            raise RuntimeError(f"rank {group.rank}: torch.distributed is already initialised with "
                               f"{dist.get_world_size()} ranks, but the group has {group.size}")
        yield
        return
    host = os.environ.get("MASTER_ADDR")
    store = dist.TCPStore(host or "127.0.0.1", 0, group.size, True, wait_for_workers=False) if group.rank == 0 else None
    info = torch.zeros(8 + 256, dtype=torch.uint8)        # rank 0's port (8 bytes) and hostname
    if store is not None:
        name = socket.gethostname().encode()[:256]
        info[:8] = torch.frombuffer(bytearray(store.port.to_bytes(8, "little")), dtype=torch.uint8)
        info[8:8 + len(name)] = torch.frombuffer(bytearray(name), dtype=torch.uint8)
    group.broadcast(info, src=0)
    if store is None:
        raw = bytes(info.tolist())
        port, name = int.from_bytes(raw[:8], "little"), raw[8:].rstrip(b"\0").decode()
        if host is None:       # across nodes (mpirun): rank 0's hostname; on its host: loopback
            host = "127.0.0.1" if name == socket.gethostname() else name
        store = dist.TCPStore(host, port, group.size, False)
    dist.init_process_group("gloo", store=store, rank=group.rank, world_size=group.size)
    try:
        yield
    finally:
        gc.collect()      # what the block built is freed while the group exists: a torch DDP reducer
        dist.destroy_process_group()       # freed after it can hang its rank (about 1 run in 25)
