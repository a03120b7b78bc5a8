"""Memory and communication of sharded data parallelism (ZeRO stages, FSDP), per rank.

    zero_memory_per_rank(7.5e9, 64)          # {"ddp": 1.2e11, "zero1": 3.14e10, "zero2": 1.66e10, "zero3": 1.9e9}
    zero_step_bytes(psi_bytes, p)            # {"ddp": ..., "zero1": ..., "zero2": ..., "zero3": ...}

Memory (Rajbhandari et al. 2020), Psi parameters, p data-parallel ranks, mixed-precision Adam:
param_bytes (2, fp16/bf16 weights), grad_bytes (2) and K optimizer bytes per parameter (12: fp32
master weights, momentum, variance):
    ddp   (2 + 2 + K) Psi          zero1   (2 + 2) Psi + K Psi / p
    zero2 2 Psi + (2 + K) Psi / p  zero3   (2 + 2 + K) Psi / p      (FSDP)
Communication per step, bytes each rank sends on a ring, Psi_b = the gradients' bytes:
    ddp, zero1, zero2   2 (p-1)/p Psi_b      (reduce-scatter + all-gather = one all-reduce)
    zero3               3 (p-1)/p Psi_b      (all-gather forward, all-gather backward, reduce-scatter)
"""

from __future__ import annotations

STAGES = ("ddp", "zero1", "zero2", "zero3")


def zero_memory_per_rank(psi: float, p: int, param_bytes: float = 2, grad_bytes: float = 2,
                         optim_bytes: float = 12) -> dict[str, float]:
    """Bytes per rank of parameters + gradients + optimizer state for each stage (see the module)."""
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    pb, gb, k = param_bytes * psi, grad_bytes * psi, optim_bytes * psi
    return {"ddp": pb + gb + k, "zero1": pb + gb + k / p, "zero2": pb + (gb + k) / p, "zero3": (pb + gb + k) / p}


def zero_step_bytes(psi_bytes: float, p: int) -> dict[str, float]:
    """Bytes each rank sends per step on a ring for each stage (see the module)."""
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    ring = (p - 1) / p * psi_bytes
    return {"ddp": 2 * ring, "zero1": 2 * ring, "zero2": 2 * ring, "zero3": 3 * ring}
