"""Homework 1 test harness, the verdict: taken in the grading process from what the ranks returned.

    problems = result_problems(outcome)        # [] when the case is right
    judge(outcomes, result_problems, traffic_problems)   # fails the test with a clear message

The reference stacks the p ranks' inputs (made in this process, kept in the Outcome) and reduces
them in float64 (exact in int64 for integers, and for max/min). Floating-point sums may differ from
it by rounding only: |got - exact| <= (p + 1) * eps(dtype) * sum_r |x_r| elementwise. Counters are checked
against minitorch_dist.cost_model.traffic and the exact per-rank counts of each algorithm.
"""

from __future__ import annotations

import math

import torch

from assignments.common.one_rank import on_one_rank
from assignments.common.rank_runs import error_text, fail, judge  # noqa: F401 (the tests import them from here)
from assignments.hw1.tests.hw1_harness import Outcome, try_launch
from assignments.hw1.tests.hw1_ranks import DTYPES, rank_fit_alpha_beta
from minitorch_dist import cost_model
from minitorch_dist.collectives import chunk_bounds

ALL_REDUCES = ("naive_all_reduce", "tree_all_reduce", "butterfly_all_reduce", "ring_all_reduce")
SAME_ON_EVERY_RANK = ALL_REDUCES + ("broadcast", "all_gather_", "all_gather")
RETURNS_X = ALL_REDUCES + ("broadcast", "reduce", "all_gather_")


# -- the reference --------------------------------------------------------------------------
def combine(inputs: list[torch.Tensor], op: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(exact result, tolerance or None for exact) of combining the ranks' inputs with `op`."""
    dtype = inputs[0].dtype
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    stack = torch.stack([x.to(wide) for x in inputs])                    # (p, *shape)
    result = {"sum": stack.sum(0), "max": stack.amax(0), "min": stack.amin(0), "prod": stack.prod(0)}[op]
    if not dtype.is_floating_point or op in ("max", "min"):
        return result, None
    eps = torch.finfo(dtype).eps * (len(inputs) + 1)
    scale = stack.abs().sum(0) if op == "sum" else result.abs()
    return result, eps * scale + torch.finfo(dtype).tiny


def expectations(o: Outcome):
    """(rank, what, got, expected, tolerance, note) for every value the case's contract fixes."""
    case, p, inputs = o.case, o.p, o.inputs
    fn = case.fn
    if fn in ALL_REDUCES:
        want, tol = combine(inputs, case.op)
        return [(r, "x", o.xs[r], want, tol, "") for r in range(p)]
    if fn == "broadcast":
        return [(r, "x", o.xs[r], inputs[case.root], None, "the root's x") for r in range(p)]
    if fn == "reduce":
        want, tol = combine(inputs, case.op)
        return [(r, "x", o.xs[r], want, tol, "the root") if r == case.root else
                (r, "x", o.xs[r], inputs[r], None, "not the root: x must be left unchanged") for r in range(p)]
    bounds = chunk_bounds(case.n, p)
    if fn == "reduce_scatter_":
        want, tol = combine(inputs, case.op)
        out = []
        for r, (a, b) in enumerate(bounds):
            out.append((r, f"buf[{a}:{b}]", o.xs[r][a:b], want[a:b], _part(tol, a, b), f"chunk {r}, owned by rank {r}"))
            if o.rets[r] is not None:
                out.append((r, "the returned chunk", o.rets[r], want[a:b], _part(tol, a, b), f"buf[{a}:{b}]"))
        return out
    if fn == "all_gather_":
        want = torch.cat([inputs[j][a:b] for j, (a, b) in enumerate(bounds)])
        return [(r, "buf", o.xs[r], want, None, "chunk j comes from rank j") for r in range(p)]
    if fn == "all_gather":
        want = torch.stack(inputs) if inputs[0].dim() == 0 else torch.cat(inputs)
        return [(r, "the returned tensor", o.rets[r], want, None, "") for r in range(p)]
    if fn == "reduce_scatter":
        want, tol = combine(inputs, case.op)
        m = want.shape[0] // p
        return [(r, "the returned tensor", o.rets[r], want[r * m:(r + 1) * m],
                 None if tol is None else tol[r * m:(r + 1) * m], "") for r in range(p)]
    raise ValueError(f"hw1_checks: no reference for {fn!r}")


def _part(tol, a, b):
    return None if tol is None else tol[a:b]


def compare(got, want: torch.Tensor, tol, dtype: torch.dtype) -> str | None:
    """None if `got` matches, else what differs: first bad index, got vs expected, how many."""
    if not isinstance(got, torch.Tensor):
        return f"expected a tensor, got {type(got).__name__}"
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if got.dtype != dtype:
        return f"dtype {got.dtype}, expected {dtype} (keep the input's dtype)"
    if tol is None:
        bad = got.to(want.dtype) != want
    else:
        g = got.to(torch.float64)
        bad = ~((g - want).abs() <= tol)                                   # NaN counts as bad
    if not bool(bad.any()):
        return None
    where = tuple(int(i) for i in bad.nonzero()[0])
    index = ", ".join(map(str, where)) if where else ""
    tol_text = "" if tol is None else f" (tolerance {float(tol[where]):.3g})"
    return (f"[{index}] = {got[where].item()!r} but expected {want[where].item()!r}{tol_text}; "
            f"{int(bad.sum())} of {bad.numel()} elements differ")


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def result_problems(o: Outcome) -> list[str]:
    """What is wrong with the values of one case: error, wrong elements, in-place contract, ranks disagreeing."""
    if o.error is not None:
        return [o.error]
    problems = []
    for r, what, got, want, tol, note in expectations(o):
        msg = compare(got, want, tol, DTYPES[o.case.dtype])
        if msg:
            note = f" ({note})" if note else ""
            problems.append(f"rank {r}: {what}{msg if msg.startswith('[') else ': ' + msg}{note}")
    if o.case.fn in RETURNS_X:
        wrong = [r for r in range(o.p) if not o.ret_is_x[r]]
        if wrong:
            problems.append(f"ranks {wrong} returned a {o.ret_types[wrong[0]]}, not x itself "
                            f"(work in place on x and return x)")
    if o.case.fn in SAME_ON_EVERY_RANK and not problems:
        values = o.rets if o.case.fn == "all_gather" else o.xs
        differ = [r for r in range(1, o.p) if not _same_bits(values[r], values[0])]
        if differ:
            problems.append(f"ranks {differ} hold different bits than rank 0 (every rank must end with "
                            f"exactly the same result)")
    return problems


# -- how it was computed: counters ------------------------------------------------------------
def _per_rank(o: Outcome, key: str) -> list[int]:
    return [c[key] for c in o.counts]


def traffic_problems(o: Outcome) -> list[str]:
    """Messages and bytes per rank against the algorithm's formulas; no provided collective used."""
    if o.error is not None:
        return [o.error]
    case, p = o.case, o.p
    s = torch.empty((), dtype=DTYPES[case.dtype]).element_size()
    nb = case.n * s
    sent, sent_b = _per_rank(o, "sent"), _per_rank(o, "bytes_sent")
    problems = []
    used = [r for r in range(p) if o.counts[r]["collectives"]]
    if used:
        problems.append(f"ranks {used} called a provided collective (group.all_reduce, ...): HW1 builds "
                        f"them from send/recv")
    if sum(sent) != sum(_per_rank(o, "recv")) or sum(sent_b) != sum(_per_rank(o, "bytes_recv")):
        problems.append(f"{sum(sent)} messages ({sum(sent_b)} B) sent but {sum(_per_rank(o, 'recv'))} "
                        f"({sum(_per_rank(o, 'bytes_recv'))} B) received: every message must be received")
    name = {"broadcast": "binomial_broadcast", "reduce": "binomial_reduce", "reduce_scatter_":
            "ring_reduce_scatter", "all_gather_": "ring_all_gather"}.get(case.fn, case.fn)
    t = cost_model.traffic(name, p, nb)
    if case.fn == "naive_all_reduce":
        want = [(p - 1, (p - 1) * nb)] + [(1, nb)] * (p - 1) if p > 1 else [(0, 0)]
        _exact(problems, "sent", sent, sent_b, want)
        _exact(problems, "received", _per_rank(o, "recv"), _per_rank(o, "bytes_recv"), want)
    elif case.fn in ("ring_all_reduce", "reduce_scatter_", "all_gather_"):
        steps = t.messages
        chunk = math.ceil(case.n / p) * s
        if case.n >= p:
            _exact(problems, "sent", sent, [None] * p, [(steps, None)] * p)
        over = [r for r in range(p) if sent[r] > steps or sent_b[r] > steps * chunk]
        if over:
            r = over[0]
            problems.append(f"rank {r} sent {sent[r]} messages, {sent_b[r]} B; at most {steps} messages of "
                            f"one chunk ({chunk} B) each")
        _totals(problems, sent, sent_b, None, t.total_bytes)
    elif case.fn == "butterfly_all_reduce" and p & (p - 1) == 0:
        _exact(problems, "sent", sent, sent_b, [(t.messages, t.bytes)] * p)
    elif case.fn in ("tree_all_reduce", "butterfly_all_reduce", "broadcast", "reduce"):
        if max(sent) != t.messages or max(sent_b) != t.bytes:
            problems.append(f"the busiest rank sent {max(sent)} messages, {max(sent_b)} B; expected "
                            f"{t.messages} messages, {t.bytes:g} B (cost_model.traffic({name!r}))")
        _totals(problems, sent, sent_b, t.total_messages, t.total_bytes)
        if case.fn == "reduce" and p > 1:
            _exact(problems, "sent", sent, sent_b, [(0, 0) if r == case.root else (1, nb) for r in range(p)])
    return problems


def _exact(problems, verb, msgs, nbytes, want) -> None:
    for r, (m, b) in enumerate(want):
        if msgs[r] != m or (b is not None and nbytes[r] != b):
            got = f"{msgs[r]} messages" + (f", {nbytes[r]} B" if b is not None else "")
            exp = f"{m} messages" + (f", {b} B" if b is not None else "")
            problems.append(f"rank {r} {verb} {got}; expected {exp}")
            return


def _totals(problems, msgs, nbytes, total_messages, total_bytes) -> None:
    if total_messages is not None and sum(msgs) != total_messages:
        problems.append(f"all ranks together sent {sum(msgs)} messages; expected {total_messages}")
    if sum(nbytes) != total_bytes:
        problems.append(f"all ranks together sent {sum(nbytes)} B; expected {total_bytes:g}")


# -- how long it took on sim ------------------------------------------------------------------
COST_NAME = {"broadcast": "binomial_broadcast", "reduce": "binomial_reduce",
             "reduce_scatter_": "ring_reduce_scatter", "all_gather_": "ring_all_gather"}


def sim_time_problems(o: Outcome, network, rel: float = 1e-9) -> list[str]:
    """The simulated time of a case run alone against its cost_model formula (p should divide n)."""
    if o.error is not None:
        return [o.error]
    if o.sim_time is None:
        return ["no simulated time: run the case alone on the sim backend"]
    name = COST_NAME.get(o.case.fn, o.case.fn)
    n_bytes = o.case.n * torch.empty((), dtype=DTYPES[o.case.dtype]).element_size()
    want = getattr(cost_model, name)(o.p, n_bytes, network.alpha, network.beta)
    if math.isclose(o.sim_time, want, rel_tol=rel, abs_tol=1e-15):
        return []
    return [f"simulated time {o.sim_time:.9g} s, but cost_model.{name}(p={o.p}, n_bytes={n_bytes}, "
            f"alpha={network.alpha:g}, beta={network.beta:g}) = {want:.9g} s "
            f"({o.sim_time / want if want else float('inf'):.4f}x): check the number and order of rounds"]


# -- the verdict ----------------------------------------------------------------------------
def launch_or_fail(fn, p: int, args=(), backend: str = "gloo", network=None):
    """launch_hw1(...)'s RunResult; a rank's error fails the test (a stub's with its message only)."""
    result, err = try_launch(fn, p, args, backend, network)
    if err is not None:
        fail(error_text(err))
    return result


# -- the student's code on one rank (never in the grading process) -----------------------------
def fit_on_rank(sizes, seconds) -> tuple[float, float]:
    """The student's fit_alpha_beta(sizes, seconds), run on one rank process: (alpha, beta), floats."""
    got = on_one_rank(rank_fit_alpha_beta, (sizes, seconds), "fit_alpha_beta(sizes, seconds)")
    if isinstance(got, str):
        fail(f"fit_alpha_beta must return a tuple (alpha, beta) of two numbers, got {got}")
    return got


def expect_close(what: str, got, want: float, rel: float, why: str = "") -> None:
    """Fail naming the task, the quantity, both values and the tolerance unless got is within rel of want."""
    if not (isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=rel, abs_tol=0.0)):
        fail(f"HW1 task 1.1: {what} = {got!r}, expected {want!r} (within {rel:.3g} relative){why}")


def expect_equal(what: str, got, want, why: str = "") -> None:
    """Fail naming the task, the quantity, what was expected and what came back, unless got == want."""
    if got != want:
        fail(f"HW1 task 1.1: {what}: expected {want!r}, got {got!r}{why}")
