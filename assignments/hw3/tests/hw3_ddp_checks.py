"""Homework 3 test harness, the verdict of tasks 3.4 and 3.5 (taken in the grading process).

PowerSGD: every step's averaged gradients equal those of torch's DistributedDataParallel with
torch's powerSGD_hook, run here on the same model, batches, rank and seed (p processes of plain torch),
within 1e-9 of the largest gradient; the bytes all-reduced per step are the plain all-reduce's
before start_powerSGD_iter, then (uncompressed elements + sum over compressed matrices of (n + m) r)
x 8 in three all-reduces. A bucket whose mean gradient has rank 1 comes back exactly (1e-10).
orthogonalize_ equals Gram-Schmidt (torch's, 1e-12), with a zero column left at zero.
Hooks: the same steps replayed here, every rank's gradient recomputed (on the batch this process
sent it, hw3_inputs.py) from the parameters the averaged gradients lead to: without a hook, the
exact mean; TopK (with and without error feedback) exactly what the compressor defines on the flat
bucket; Uint8 within half a step of its scale; and the bytes each collective carried are the
compressor's payload per bucket.
"""

from __future__ import annotations

import tempfile

import torch
from torch import nn

from assignments.hw3.tests.hw3_checks import _compare, topk_expected, uint8_bound
from assignments.hw3.tests.hw3_harness import Outcome
from assignments.hw3.tests.hw3_powersgd import DIMS, LR, START_ITER, orthogonalize_inputs, tiny_mlp, torch_powersgd
from assignments.hw3.tests.hw3_setup import payload_bytes
from assignments.hw3.tests.hw3_training import CHAR, uncompressed_losses

TORCH_TOL, RANK1_TOL = 1e-9, 1e-10


def _same_on_every_rank(o: Outcome, key: str) -> list[str]:
    first = o.ranks[0][key]
    for r, rep in enumerate(o.ranks[1:], 1):
        for step, (a, b) in enumerate(zip(rep[key], first)):
            if any(not torch.equal(x, y) for x, y in zip(a, b)):
                return [f"rank {r}'s averaged gradients differ from rank 0's at step {step}: every rank must get "
                        "the same average"]
    return []


def _grads_problems(got_steps, want_steps, tol: float, what: str) -> list[str]:
    names = [n for n, _ in tiny_mlp().named_parameters()]
    for step, (got, want) in enumerate(zip(got_steps, want_steps)):
        for name, g, w in zip(names, got, want):
            bad = _compare(g.reshape(-1), w.reshape(-1), f"step {step}, {name}.grad ({what})", tol)
            if bad:
                return [bad]
    if len(got_steps) != len(want_steps):
        return [f"{len(got_steps)} steps reported, expected {len(want_steps)}"]
    return []


def shapes_of_model() -> list[tuple[int, int]]:
    """(n, m) of every parameter as a matrix, in bucket order (the last parameter first)."""
    return [(p.shape[0], p[0].numel()) for p in reversed(list(tiny_mlp().parameters()))]


def powersgd_bytes(rank: int, shapes) -> int:
    """Bytes all-reduced by one PowerSGD step: plain elements + (n + m) r per compressed matrix, x 8."""
    total = 0
    for n, m in shapes:
        r = min(n, m, rank)
        total += (n + m) * r if (n + m) * r * 2 < n * m else n * m
    return 8 * total


def powersgd_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    with tempfile.TemporaryDirectory(prefix="hw3-torch-powersgd-") as folder:
        want = torch_powersgd(o.case, o.inputs, folder)
    problems = _same_on_every_rank(o, "grads") + _grads_problems(o.ranks[0]["grads"], want, TORCH_TOL,
                                                                  "against torch's powerSGD_hook")
    dense, compressed = powersgd_bytes(10 ** 9, shapes_of_model()), powersgd_bytes(o.case.param, shapes_of_model())
    for step, comm in enumerate(o.ranks[0]["comm"]):
        want_bytes, calls = (dense, 1) if step < START_ITER else (compressed, 3)
        if comm["all_reduce_bytes"] != want_bytes or comm["all_reduce_calls"] > calls:
            problems.append(f"step {step}: {comm['all_reduce_calls']} all-reduces of {comm['all_reduce_bytes']} bytes "
                            f"in all, expected at most {calls} of {want_bytes} bytes"
                            + (" (the dense gradients)" if step < START_ITER else
                               f" (rank-{o.case.param} factors, vectors and small matrices plain; dense: {dense})"))
            break
    return problems


def rank1_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    r = o.case.param
    per_rank = o.inputs
    mean = [sum(g[i] for g in per_rank) / o.p for i in range(3)]
    want = torch.cat([t.reshape(-1) for t in reversed(mean)])
    problems = [_compare(rep["out"], want, f"rank {q}: the averaged bucket (its mean has rank {r})", RANK1_TOL)
                for q, rep in enumerate(o.ranks)]
    want_bytes = powersgd_bytes(r, [(5, 1), (4, 15), (12, 10)])
    got = o.ranks[0]["comm"]
    if got["all_reduce_bytes"] != want_bytes:
        problems.append(f"{got['all_reduce_bytes']} bytes all-reduced, expected {want_bytes}: the (5,) vector "
                        f"plain, the (12, 10) and the (4, 3, 5) viewed as (4, 15) as (n + m) r when worth it "
                        "(should_compress), else plain")
    return [m for m in problems if m]


def _gram_schmidt(x: torch.Tensor, eps: float) -> torch.Tensor:
    from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import _orthogonalize_gram_schmidt
    keep = x.abs().sum(dim=0) > 0                      # a zero column stays zero (torch's turns nan)
    y = x[:, keep].clone().unsqueeze(0)
    _orthogonalize_gram_schmidt(y, eps)
    out = torch.zeros_like(x)
    out[:, keep] = y[0]
    return out


def orthogonalize_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    problems = []
    for i, (x, eps) in enumerate(zip(orthogonalize_inputs(o.case.n, o.case.param), (0.0, 1e-3, 0.0))):
        rep = o.ranks[0]["outs"][i]
        problems.append(_compare(rep["out"].reshape(-1), _gram_schmidt(x, eps).reshape(-1),f"orthogonalize_(matrix {i}, epsilon {eps}) "
                                 "(Gram-Schmidt in place, column by column)", 1e-12))
        if not rep["returned_same"]:
            problems.append("orthogonalize_ must work in place and return the matrix it was given")
    return [m for m in problems if m]


# -- hooks: replay the steps here -------------------------------------------------------------------------------
def local_grads(params: list[torch.Tensor], xy) -> list[torch.Tensor]:
    """The model's gradients at `params` on one rank's batch (x, y)."""
    model = tiny_mlp()
    with torch.no_grad():
        for p, v in zip(model.parameters(), params):
            p.copy_(v)
    x, y = xy
    nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def _flat(grads) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in reversed(grads)])


def _unflat(flat: torch.Tensor, like) -> list[torch.Tensor]:
    out, offset = [], 0
    for g in reversed(like):
        out.append(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
    return list(reversed(out))


def hook_problems(o: Outcome) -> list[str]:
    """Replays the case's steps: the expected average of every step from the reported parameters."""
    if o.error is not None:
        return [o.error]
    c, problems = o.case, _same_on_every_rank(o, "grads")
    params = [p.detach().clone() for p in tiny_mlp().parameters()]
    residual = [None] * o.p
    n = sum(p.numel() for p in params)
    for step, got in enumerate(o.ranks[0]["grads"]):
        flats = [_flat(local_grads(params, o.inputs[r][step])) for r in range(o.p)]
        if c.kind == "allreduce_ddp":
            want, bound = sum(flats) / o.p, None
        elif c.data.startswith("topk"):
            if c.data.endswith("_ef"):
                deltas = [f + (residual[r] if residual[r] is not None else 0) for r, f in enumerate(flats)]
                sent = [topk_expected(d, c.param) for d in deltas]
                residual = [d - s for d, s in zip(deltas, sent)]
            else:
                sent = [topk_expected(f, c.param) for f in flats]
            want, bound = sum(sent) / o.p, None
        else:
            want, bound = sum(flats) / o.p, sum(uint8_bound(f, c.param) for f in flats) / o.p
        got_flat = _flat(got)
        if bound is None:
            bad = _compare(got_flat, want, f"step {step}: the averaged bucket (flat, last parameter first)", 1e-12)
        else:
            worst = ((got_flat - want).abs() - bound - 1e-12).max().item() if n else 0.0
            bad = (f"step {step}: the averaged bucket is {worst:.3g} beyond the quantizer's bound (scale/2 per chunk, "
                   "averaged over ranks)") if worst > 0 else None
        if bad:
            problems.append(bad)
            break
        want_bytes = n * 8 if c.kind == "allreduce_ddp" else payload_bytes(c.data.removesuffix("_ef"), n, c.param)
        op = "all_reduce" if c.kind == "allreduce_ddp" else "all_gather"
        comm = o.ranks[0]["comm"][step]
        if comm[f"{op}_bytes"] != want_bytes or comm["p2p"]:
            problems.append(f"step {step}: {comm[f'{op}_bytes']} bytes into {op} (expected {want_bytes}: "
                            + ("the bucket" if op == "all_reduce" else "the compressor's payload of the one bucket")
                            + f"), {comm['p2p']} point-to-point messages (expected 0)")
            break
        params = [p - LR * g for p, g in zip(params, got)]
    return problems


_UNCOMPRESSED: list = []


def training_problems(o: Outcome) -> list[str]:
    """The loss claims of hw3_training (the last 5 steps' mean against uncompressed training's)."""
    if o.error is not None:
        return [o.error]
    if not _UNCOMPRESSED:
        _UNCOMPRESSED.extend(uncompressed_losses())
    ref = sum(_UNCOMPRESSED[-5:]) / 5
    got = sum(o.ranks[0]["losses"][-5:]) / 5
    how, margin = CHAR["claims"][o.case.data]
    ok = got <= ref + margin if how == "at most" else got >= ref + margin
    if ok:
        return []
    return [f"the mean loss of the last 5 of {CHAR['steps']} steps is {got:.4f}; uncompressed training ends at "
            f"{ref:.4f}, and {o.case.data} should end {how} {margin} above it"
            + (" (top-k without error feedback drops 99.9% of every gradient for good: it must lag)"
               if how == "at least" else "")]


__all__ = ["training_problems", "powersgd_problems", "rank1_problems", "orthogonalize_problems", "hook_problems", "DIMS"]
