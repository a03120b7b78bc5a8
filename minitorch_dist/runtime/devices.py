"""Which device a rank computes on: the `device=` of launch() and world_group(), as group.device.

    launch(main, 4)                                  # group.device == cpu
    launch(main, 2, backend="gloo", device="cuda")   # each rank a GPU (cuda:rank % GPUs); messages
                                                     # staged through the host (one GPU is enough)
    launch(main, 4, backend="nccl")                  # one GPU per rank, collectives by NCCL

A rank's GPU is its local rank (LOCAL_RANK under torchrun, else its rank) modulo the GPUs it sees.
Everything that needs CUDA in the runtime is here and in transports/nccl.py.
"""

from __future__ import annotations

import os

import torch

from .errors import LaunchError

CPU = torch.device("cpu")
SETUP_CUDA = "bash scripts/setup.sh --cuda (torch's CUDA build)"


def local_rank(rank: int) -> int:
    """This process's rank on its node: LOCAL_RANK (torchrun, minitorch_dist.run), else `rank`."""
    value = os.environ.get("LOCAL_RANK")
    return int(value) if value is not None and value.isdigit() else rank


def no_gpu_reason() -> str | None:
    """Why this process cannot use CUDA, or None when it can."""
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return f"this torch is a CPU build (torch {torch.__version__}); install the CUDA build: {SETUP_CUDA}"
        return "torch sees no CUDA GPU here (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)"
    return None


def rank_device(device, rank: int) -> torch.device:
    """The torch.device of rank `rank` for a run's `device=` ("cpu", "cuda", "cuda:1" or None)."""
    if device is None or str(device) == "cpu":
        return CPU
    device = torch.device(device)
    if device.type != "cuda":
        raise LaunchError(f"device={str(device)!r}: use 'cpu' or 'cuda' (or 'cuda:N')")
    reason = no_gpu_reason()
    if reason is not None:
        raise LaunchError(f"device='cuda' on rank {rank}: {reason}. Run on the CPU with device='cpu'.")
    if device.index is None:
        device = torch.device("cuda", local_rank(rank) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def one_gpu_per_rank(rank: int, world_size: int) -> torch.device:
    """The GPU of rank `rank` for NCCL, which needs a GPU of its own per rank on a node."""
    reason = no_gpu_reason()
    if reason is not None:
        raise LaunchError(f"backend='nccl' on rank {rank}: {reason}. Use backend='gloo' (CPU), or "
                          f"backend='gloo', device='cuda' on a machine with fewer GPUs than ranks.")
    gpus, local = torch.cuda.device_count(), local_rank(rank)
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    if local_size > gpus or local >= gpus:
        raise LaunchError(f"backend='nccl' needs one GPU per rank: this node has {gpus} GPU(s) and "
                          f"{local_size} ranks. Start at most {gpus} ranks per node, or use backend='gloo', "
                          f"device='cuda' (ranks share GPUs; messages go through the host).")
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    return device


def check_local_job(backend: str, device, world_size: int) -> bool:
    """In the launcher, before any rank starts: the same errors the ranks would meet, said once.
    True when the ranks will use a GPU."""
    if backend == "nccl":
        reason = no_gpu_reason()
        if reason is not None:
            raise LaunchError(f"launch(backend='nccl'): {reason}. Use backend='gloo' (CPU).")
        if world_size > torch.cuda.device_count():
            raise LaunchError(f"launch(backend='nccl') needs one GPU per rank: {world_size} ranks, "
                              f"{torch.cuda.device_count()} GPU(s) here. Start at most "
                              f"{torch.cuda.device_count()} ranks, or use backend='gloo', device='cuda' "
                              f"(ranks share GPUs; messages go through the host).")
        return True
    if device is not None and str(device) != "cpu":
        reason = no_gpu_reason()
        if reason is not None:
            raise LaunchError(f"launch(device={str(device)!r}): {reason}. Run on the CPU with device='cpu'.")
        return True
    return False
