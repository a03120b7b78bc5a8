"""Homework 2 test harness, the verdict: taken in the grading process from what the ranks returned.

    judge(outcomes, training_problems, how_problems)     # fails the test with a clear message

Training runs are compared with a single-process run of the same model, optimizer and steps on
the whole global batch (hw2_inputs.reference: the batches drawn from the grading's secret, of which
each rank received only its part), in float64: every parameter within TOL (TOL_ADAMW with AdamW),
and every rank's parameters bitwise equal to rank 0's. Gossip values are compared with closed forms
that float64 computes exactly (inputs are small multiples of 6 or 8), so those checks are exact.
"""

from __future__ import annotations

import functools
import math

import torch

from assignments.common.rank_runs import error_text, fail, judge  # noqa: F401 (the tests import them from here)
from assignments.hw2.tests.hw2_harness import Outcome
from assignments.hw2.tests.hw2_inputs import batches, reference
from assignments.hw2.tests.hw2_setup import Case, build_model

TOL = 1e-12               # max |parameter - single-process reference|, float64, after every step of a run
TOL32 = 2e-6              # the same for the float32 model (tiedmid): averaging in another order rounds differently
# the same for AdamW (float64): its update g / (|g| + eps) turns the rounding of a gradient near eps = 1e-8 into
# up to ~1e-7 of it, so random batches (drawn per grading) reach 6e-13 (the solutions, 16 secrets, 230 runs at
# p = 2-4; 2e-14 on the one fixed batch of before): 10x that, where a wrong averaging is off by 1e-4 or more
TOL_ADAMW = 1e-11
PS_SLACK_BYTES = 512      # a worker's per-step traffic beyond its gradient, parameters and batch part


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.view(torch.int64), b.view(torch.int64))


@functools.lru_cache(maxsize=64)
def param_specs(case: Case) -> tuple[tuple[str, int, int, bool], ...]:
    """(name, numel, element size, requires_grad) of each parameter of the case's model, in order."""
    return tuple((n, p.numel(), p.element_size(), p.requires_grad) for n, p in build_model(case).named_parameters())


def _where(case: Case, index: int) -> str:
    """'net.2.weight[17]' for a flat parameter index."""
    offset = 0
    for name, numel, _, _ in param_specs(case):
        if index < offset + numel:
            return f"{name}[{index - offset}]"
        offset += numel
    return f"[{index}]"


def _compare(case: Case, got, want: torch.Tensor, what: str) -> str | None:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return f"{what}: expected {tuple(want.shape)} float64 values, got {getattr(got, 'shape', type(got).__name__)}"
    tol = TOL32 if case.model == "tiedmid" else TOL_ADAMW if case.optim == "adamw" else TOL
    diff = (got.to(torch.float64) - want).abs()
    worst = int(diff.nan_to_num(float("inf")).argmax())
    if not bool(diff[worst] <= tol):
        return (f"{what} differ from the single-process run on the whole batch: {_where(case, worst)} = "
                f"{got[worst].item()!r}, expected {want[worst].item()!r} (|diff| {diff[worst].item():.3g} > "
                f"tolerance {tol:g}); {int((diff > tol).sum())} of {diff.numel()} values differ")
    return None


def outside_problems(o: Outcome) -> list[str]:
    """Edge "outside": ranks that started from different weights hold the single-process run's
    parameters after every step; the wrapper's .module is the model and its named_parameters() are
    the model's with the prefix "module."."""
    if o.error is not None:
        return [o.error]
    want_flats = reference(o.case, o.p)[0]
    problems = []
    for r, rep in enumerate(o.ranks):
        for s, (got, want) in enumerate(zip(rep["flats"], want_flats)):
            message = _compare(o.case, got, want,
                               f"rank {r}: parameters after step {s} (rank r started from weights of its own)")
            if message:
                problems.append(message)
                break
        if not rep["module_is_model"]:
            problems.append(f"rank {r}: the wrapper's .module is not the model it wraps")
        want_names = ["module." + n for n in rep["model_names"]]
        if rep["names"] != want_names:
            problems.append(f"rank {r}: named_parameters() of the wrapper are {rep['names']}; expected the model's "
                            f"with the prefix 'module.': {want_names}")
    return problems


# -- training runs: results -----------------------------------------------------------------
def training_problems(o: Outcome) -> list[str]:
    """Parameters after the run equal the single-process reference (within TOL) and rank 0's bits."""
    if o.error is not None:
        return [o.error]
    flats, losses = reference(o.case, o.p)
    want = flats[-1]
    problems = [_compare(o.case, rep["params"], want, f"rank {r}: parameters") for r, rep in enumerate(o.ranks)]
    problems = [m for m in problems if m]
    differ = [r for r, rep in enumerate(o.ranks) if not _same_bits(rep["params"], o.ranks[0]["params"])]
    if differ and not problems:
        problems.append(f"ranks {differ} hold different parameter bits than rank 0 (replicas must stay bitwise "
                        f"equal: every rank must apply exactly the same averaged gradient)")
    if o.case.kind == "ps":
        got = [st["loss"] for st in o.ranks[0]["steps"]]
        if any(not isinstance(g, float) or abs(g - w) > TOL for g, w in zip(got, losses)) or len(got) != len(losses):
            problems.append(f"rank 0's step() returned losses {got}; the global batches' mean losses are {losses}")
        workers = [r for r in range(1, o.p) if any(st["loss"] is not None for st in o.ranks[r]["steps"])]
        if workers:
            problems.append(f"ranks {workers} returned a loss from step(); workers return None")
    return problems


# -- training runs: how the gradients were averaged -------------------------------------------
def _grad_bytes(case: Case, grad_none: list[bool]) -> tuple[int, int]:
    """(how many trainable parameters had a gradient in a step, their bytes)."""
    had = [(numel * size) for (_, numel, size, trainable), none in zip(param_specs(case), grad_none)
           if trainable and not none]
    return len(had), sum(had)


@functools.lru_cache(maxsize=256)
def _expected_calls(case: Case, grad_none: tuple[bool, ...]) -> tuple[int, str]:
    """(all-reduces per step, why) of the case's version."""
    if case.kind != "bucketed":
        return _grad_bytes(case, list(grad_none))[0], "one per gradient"
    from minitorch_dist.data_parallel import plan_buckets
    model = build_model(case)
    trainable = [p for p in model.parameters() if p.requires_grad]
    has_grad = {id(p) for p, none in zip(model.parameters(), grad_none) if not none}
    plan = plan_buckets(trainable, int(case.bucket_kb / 1024 * 2 ** 20))
    used = [b for b in plan if any(id(trainable[i]) in has_grad for i in b)]
    return len(used), f"one per bucket of plan_buckets(...): {len(plan)} buckets for {len(trainable)} parameters"


def how_problems(o: Outcome) -> list[str]:
    """Per step: only all-reduces, of exactly the gradients' bytes, as many as the version issues,
    started after backward (2.2) or some before backward ended (2.3, 2.4); none under no_sync."""
    if o.error is not None:
        return [o.error]
    case, problems = o.case, []
    for r, rep in enumerate(o.ranks):
        for s, st in enumerate(rep["steps"]):
            where = f"rank {r}, step {s}"
            nbytes = _grad_bytes(case, st["grad_none"])[1]
            calls, why = _expected_calls(case, tuple(st["grad_none"]))
            if st["sent"] or st["recv"]:
                problems.append(f"{where}: {st['sent']} point-to-point messages sent, {st['recv']} received; "
                                f"data parallel uses the provided all_reduce only")
            if st["collectives"] != st["all_reduce"]:
                problems.append(f"{where}: {st['collectives'] - st['all_reduce']} provided collectives other than "
                                f"all_reduce (the replicas already start equal: no broadcast per step)")
            if st["ar_bytes"] != nbytes:
                problems.append(f"{where}: all-reduced {st['ar_bytes']} B; the gradients that exist hold {nbytes} B "
                                f"(each gradient once; frozen parameters and .grad None are not sent)")
            if st["all_reduce"] != calls:
                problems.append(f"{where}: {st['all_reduce']} all-reduces; expected {calls} ({why})")
            if st["in_no_sync"]:
                problems.append(f"{where}: {st['in_no_sync']} all-reduces during the backward under no_sync(); "
                                f"accumulation steps must not communicate")
            starts = st["starts"]
            if case.kind == "allreduce" and starts and min(starts) < 0:
                problems.append(f"{where}: an all-reduce started {-min(starts) * 1e3:.3f} ms before backward "
                                f"returned; version 1 (AllReduceDDP) all-reduces after backward, in "
                                f"finish_gradient_synchronization")
            if case.kind in ("overlap", "bucketed") and calls >= 2 and starts and min(starts) >= 0:
                problems.append(f"{where}: every all-reduce started after backward returned; {case.kind} must start "
                                f"them from the gradient hooks, while backward still runs")
            elif case.kind in ("overlap", "bucketed") and calls >= 2 and starts and not _in_flight(st):
                problems.append(f"{where}: each all-reduce started during backward was waited for before backward "
                                f"went on (every one ended before the next started and before backward returned), "
                                f"so nothing overlapped; {case.kind} keeps the handles (async_op=True) and waits "
                                f"for them in finish_gradient_synchronization")
    return problems


def _in_flight(step: dict) -> bool:
    """Some all-reduce started before backward returned was still in flight while backward kept
    computing: it ended after backward returned, or after another all-reduce started."""
    starts, ends = step["starts"], step.get("ends") or step["starts"]
    return any(s < 0 and (e > 0 or any(s < s2 < e for s2 in starts)) for s, e in zip(starts, ends))


def ps_traffic_problems(o: Outcome) -> list[str]:
    """Parameter server: every message has rank 0 at one end, no provided collective after the
    constructor, and a worker moves only its gradient, the parameters and its part of the batch."""
    if o.error is not None:
        return [o.error]
    problems = []
    for r, rep in enumerate(o.ranks):
        if r and any(peer != 0 for peer in rep["peers"]):
            problems.append(f"rank {r} exchanged messages with ranks {rep['peers']}; every message of a parameter "
                            f"server has rank 0 at one end")
        if rep["collective_ops"] or any(st["collectives"] for st in rep["steps"]):
            problems.append(f"rank {r} used provided collectives {rep['collective_ops']} in step(); the parameter "
                            f"server moves everything with point-to-point messages through rank 0")
        x, y = _batch_rows(o.case, o.p)
        part = math.ceil(o.case.batch / o.p) * (x + y)
        for s, st in enumerate(rep["steps"] if r else []):
            if st["bytes_sent"] > rep["trainable_bytes"] + PS_SLACK_BYTES:
                problems.append(f"rank {r}, step {s}: sent {st['bytes_sent']} B; its gradient holds "
                                f"{rep['trainable_bytes']} B (frozen parameters have none: do not send them)")
            if st["bytes_recv"] > rep["trainable_bytes"] + part + PS_SLACK_BYTES:
                problems.append(f"rank {r}, step {s}: received {st['bytes_recv']} B; the trainable parameters "
                                f"hold {rep['trainable_bytes']} B and its part of the batch at most {part} B")
    return problems


def _batch_rows(case: Case, p: int) -> tuple[int, int]:
    """Bytes of one sample's input and target in the case's batches."""
    x, y = batches(case, p)[0]
    return x[0].numel() * x.element_size(), y[0].numel() * y.element_size()
