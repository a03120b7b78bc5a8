"""Homework 3 test harness: what a case runs, the families of its inputs, and the sizes the payloads
must have. Used on the ranks (hw3_ranks.py) and in the grading process (hw3_checks.py). The inputs
themselves are drawn in the grading process from the grading's secret (hw3_inputs.py), and each rank
receives only its own.

Inputs are float64 (n,) tensors, different on every rank (and every step), drawn from seeds:
    "rand"   normal values around -0.5 with spread 3, and some exact zeros
    "big"    1e6 + 1e3 * normal: large values, where a scale taken from the maximum alone is wrong
    "grid"   per chunk j, zero_j + q * scale_j with dyadic zero_j and scale_j = 2^-(j % 4), levels q
             in 0..255 with 0 and 255 present; every 5th chunk constant, every 5th after it zeros:
             a correct quantizer returns these exactly
    "ties"   multiples of 0.5 in [-3, 3]: many equal magnitudes, of both signs (top-k tie-break)
    "dyadic" multiples of 2^-6 in [-4, 4]: sums of them are exact in float64 (error feedback)
    "spiky"  normal values plus large ones (spread 20, the same on every rank) at positions 3, 10,
             17, ...: the ranks' top-k indices coincide, so their values must add up
Sizes n are chosen so that neither the chunk nor p divides them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from minitorch_dist.compression.common import Compressor, check_op

QUANT_KINDS = ("uint8_round_trip", "sign_round_trip")
QUANT_AR_KINDS = ("uint8_all_reduce", "sign_all_reduce")
SPARSE_KINDS = ("topk_round_trip", "topk_all_reduce", "randomk_all_reduce")
EF_KINDS = ("ef_grid", "ef_topk", "ef_sign_quadratic")
BAD_KINDS = ("bad_quantize", "bad_sparsify", "bad_error_feedback")
POWERSGD_KINDS = ("powersgd_ddp", "powersgd_rank1", "orthogonalize")
HOOK_KINDS = ("allreduce_ddp", "compress_ddp", "char_training")
BOUNDARY_KINDS = ("boundary_exact", "boundary_topk", "boundary_uint8", "boundary_lowrank", "lowrank_round_trip",
                  "bad_boundary")
TASK_OF = {**dict.fromkeys(POWERSGD_KINDS, "task3_4"), **dict.fromkeys(HOOK_KINDS, "task3_5"),
           **dict.fromkeys(BOUNDARY_KINDS, "task3_6"),
           **dict.fromkeys(QUANT_KINDS + QUANT_AR_KINDS + ("bad_quantize",), "task3_1"),
           **dict.fromkeys(SPARSE_KINDS + ("bad_sparsify",), "task3_2"),
           **dict.fromkeys(EF_KINDS + ("bad_error_feedback",), "task3_3")}
WHAT = {"uint8_round_trip": "Uint8Quantizer({c}) round trip", "sign_round_trip": "SignQuantizer({c}) round trip",
        "uint8_all_reduce": "compressed_all_reduce(x, group, Uint8Quantizer({c}), {op!r})",
        "sign_all_reduce": "compressed_all_reduce(x, group, SignQuantizer({c}), {op!r})",
        "topk_round_trip": "TopK({c}) round trip", "topk_all_reduce": "TopK({c}).aggregate(..., {op!r})",
        "randomk_all_reduce": "RandomK({c}, seed=11).aggregate(..., {op!r}), 3 steps",
        "ef_grid": "ErrorFeedback(HalfGrid()).all_reduce(..., 'sum'), 6 steps",
        "ef_topk": "ErrorFeedback(TopK({c})).all_reduce(..., 'sum'), 6 steps",
        "ef_sign_quadratic": "error-feedback signSGD against plain signSGD on a quadratic",
        "bad_quantize": "bad input to the quantizers and compressed_all_reduce",
        "bad_sparsify": "bad k for TopK and RandomK", "bad_error_feedback": "bad input to ErrorFeedback",
        "powersgd_ddp": "HookedDDP + powersgd_hook, rank {c}, {data}, {n} steps, against torch's powerSGD_hook",
        "powersgd_rank1": "powersgd_hook of rank {c} on a bucket whose mean gradient has rank {c}",
        "orthogonalize": "orthogonalize_ on ({n}, {c}) matrices (epsilon 0 and 1e-3, a zero column)",
        "allreduce_ddp": "HookedDDP without a hook, {n} steps",
        "compress_ddp": "HookedDDP + compression_hook({data}, {c}), {n} steps",
        "char_training": "CharTransformer, HookedDDP + {data}, {n} SGD steps, against uncompressed training",
        "boundary_exact": "two_stage_step at boundary {c} through CompressedBoundary(Identity())",
        "boundary_topk": "two_stage_step at boundary {c}, forward TopK(40), backward TopK(25)",
        "boundary_uint8": "two_stage_step at boundary {c}, forward Uint8Quantizer(20), backward TopK(30)",
        "boundary_lowrank": "two_stage_step at boundary {c}, forward LowRank(2, seed=3), backward LowRank(3, seed=8)",
        "lowrank_round_trip": "LowRank({c}, seed={n}) round trip, {data} input matrix",
        "bad_boundary": "bad arguments to LowRank, CompressedBoundary and split_char_transformer"}

RANDOMK_SEED, RANDOMK_STEPS, EF_STEPS = 11, 3, 6
QUADRATIC = {"dim": 16, "chunk": 16, "steps": 300, "lr": 0.3, "decay": 0.99, "spread": 1.0,
             "ef_at_most": {1: 1e-4, 2: 0.03}}          # p = 1, p >= 2: relative distance to the minimum


@dataclass(frozen=True)
class Case:
    """One run on every rank: kind (see WHAT), n elements, param (chunk or k), op, input family, tag."""

    kind: str
    n: int = 0
    param: int = 0
    op: str = "avg"
    data: str = "rand"
    tag: str = ""

    @property
    def task(self) -> str:
        return TASK_OF[self.kind]

    def describe(self, p: int) -> str:
        """'compressed_all_reduce(x, group, Uint8Quantizer(5), 'avg') (n 37, rand inputs, p 3)'."""
        what = WHAT[self.kind].format(c=self.param, op=self.op, data=self.data, n=self.n)
        if self.kind in POWERSGD_KINDS + HOOK_KINDS + BOUNDARY_KINDS[:-1]:
            return f"{what} (p {p})"
        return what if self.kind.startswith(("bad", "ef_sign")) else f"{what} (n {self.n}, {self.data} inputs, p {p})"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def draw_input(case: Case, seed: int, spikes_seed: int) -> torch.Tensor:
    """One rank's input of the case at one step, (n,) float64, from `seed` (the spikes of "spiky" from
    `spikes_seed`, the same on every rank): see the module docstring. The tests draw both seeds from
    the grading's secret (hw3_inputs.py)."""
    n = case.n
    gen = _gen(seed)
    if case.data == "big":
        return 1e6 + 1e3 * torch.randn(n, generator=gen, dtype=torch.float64)
    if case.data == "ties":
        return torch.randint(-6, 7, (n,), generator=gen).to(torch.float64) / 2
    if case.data == "dyadic":
        return torch.randint(-256, 257, (n,), generator=gen).to(torch.float64) / 64
    if case.data == "grid":
        return grid_input(n, case.param, seed)
    if case.data == "spiky":
        spikes = 20.0 * torch.randn(n, generator=_gen(spikes_seed), dtype=torch.float64)
        return torch.randn(n, generator=gen, dtype=torch.float64) + (torch.arange(n) % 7 == 3) * spikes
    x = 3.0 * torch.randn(n, generator=gen, dtype=torch.float64) - 0.5
    x[::11] = 0.0
    return x


def grid_input(n: int, chunk: int, seed: int) -> torch.Tensor:
    """Values a uint8 quantizer with chunks of `chunk` must return exactly (module docstring)."""
    gen, out = _gen(seed), []
    for j in range(math.ceil(n / chunk)):
        size = min(chunk, n - j * chunk)
        zero, scale = -3.5 + 1.25 * ((j + seed) % 7), 2.0 ** -(j % 4)
        q = torch.randint(0, 256, (size,), generator=gen).to(torch.float64)
        if size >= 2:
            q[0], q[-1] = 0, 255
        if j % 5 == 3:
            q.zero_()                                     # a constant chunk: scale 0
        values = zero + q * scale
        out.append(torch.zeros(size, dtype=torch.float64) if j % 5 == 4 else values)
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def chunks(n: int, chunk: int) -> int:
    return math.ceil(n / chunk)


def payload_bytes(kind: str, n: int, param: int) -> int:
    """Bytes of one rank's payload (what it sends into the all-gather or all-reduce)."""
    if kind.startswith("uint8"):
        return n + 8 * chunks(n, param)              # a uint8 per element, a float32 scale and zero per chunk
    if kind.startswith("sign"):
        return chunks(n, 8) + 4 * chunks(n, param)   # a bit per element, a float32 scale per chunk
    if kind.startswith("topk") or kind == "ef_topk":
        return param * (8 + 4)                       # k float64 values and k int32 indices
    if kind.startswith("randomk"):
        return param * 8                             # k float64 values (the indices are known to all)
    raise KeyError(kind)


class HalfGrid(Compressor):
    """A harness compressor for error feedback: x rounded to the nearest multiple of 1/2 (half to
    even), sent as float64, summed with one all-reduce. Deterministic and exact on dyadic inputs."""

    def compress(self, x):
        return ((x * 2).round() / 2,)

    def decompress(self, payload, numel, dtype):
        return payload[0].to(dtype).reshape(numel)

    def payload_bytes(self, numel, dtype=torch.float32):
        return numel * 8

    def aggregate(self, payload, numel, dtype, group, op="avg"):
        return group.all_reduce(payload[0].to(dtype).clone(), check_op(op))


def top_k_positions(x: torch.Tensor, k: int) -> list[int]:
    """The positions of the k largest |x|, ties to the lower position (the definition, in Python)."""
    values = x.tolist()
    return sorted(sorted(range(len(values)), key=lambda i: (-abs(values[i]), i))[:k])


def quadratic(p: int, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(a, [c_0, ..., c_{p-1}]) from `seed`: rank r's loss is 0.5 sum_i a_i (x_i - c_ri)^2; the minimum
    of the mean over ranks is x* = mean_r c_r (a is the same on every rank; c_r = a shared center plus
    an offset of spread QUADRATIC["spread"] per rank). The tests draw the seed from the grading's
    secret (hw3_inputs.py) and send rank r only (a, c_r)."""
    d, gen = QUADRATIC["dim"], _gen(seed)
    a = 0.5 + 1.5 * torch.rand(d, generator=gen, dtype=torch.float64)
    center = 2.0 * torch.randn(d, generator=gen, dtype=torch.float64)
    return a, [center + QUADRATIC["spread"] * torch.randn(d, generator=gen, dtype=torch.float64) for _ in range(p)]
