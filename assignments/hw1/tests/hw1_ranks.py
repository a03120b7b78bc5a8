"""Homework 1 test harness, rank side: the cases and the code each rank runs.

Everything here runs inside the rank processes (or sim threads) and only reports: what x holds
after the call, what was returned, how many messages were sent. It never judges; the verdict
is taken in the grading process (hw1_checks.py). Each rank's x is made in the grading process
(hw1_inputs.py) and comes to the rank as its own argument. See hw1_harness.py for how cases are run.
"""

from __future__ import annotations

import numbers
import reprlib
from dataclasses import dataclass

import torch

from assignments.common.rank_runs import run_case_list

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8}


@dataclass(frozen=True)
class Case:
    """One call of a homework function on every rank, with inputs the harness makes (hw1_inputs.py).

    fn:     the function's name in minitorch_dist.collectives ("ring_all_reduce", "broadcast", ...)
    n:      elements of x on each rank (x's shape is `shape` if given, else (n,))
    inputs: "constant" (rank r holds one integer c[r] everywhere, drawn from the grading's secret)
            or "random" (drawn per rank from the secret and `seed`)
    tag:    which test looks at the case
    """

    fn: str
    n: int
    dtype: str = "float32"
    op: str = "sum"
    inputs: str = "random"
    seed: int = 0
    root: int = 0
    shape: tuple | None = None
    tag: str = ""

    def describe(self, p: int) -> str:
        """"ring_all_reduce(p=5, n=1038, float32, op=sum, random inputs)" for messages."""
        size = f"shape={self.shape}" if self.shape is not None else f"n={self.n}"
        op = "" if self.fn in ("broadcast", "all_gather_", "all_gather") else f", op={self.op}"
        root = f", root={self.root}" if self.fn in ("broadcast", "reduce") else ""
        inputs = "rank r holds c[r] everywhere" if self.inputs == "constant" else f"random inputs, seed {self.seed}"
        return f"{self.fn}(p={p}, {size}, {self.dtype}{op}{root}; {inputs})"


# -- on the ranks ---------------------------------------------------------------------------
def _call(case: Case, x: torch.Tensor, group):
    import minitorch_dist.collectives as collectives
    fn = getattr(collectives, case.fn)
    if case.fn == "broadcast":
        return fn(x, group, root=case.root)
    if case.fn == "reduce":
        return fn(x, group, root=case.root, op=case.op)
    if case.fn in ("all_gather_", "all_gather"):
        return fn(x, group)
    return fn(x, group, op=case.op)


def _snapshot(counters) -> dict:
    provided = counters.collective_calls()
    return {"sent": counters.messages_sent, "bytes_sent": counters.bytes_sent,
            "recv": counters.messages_recv, "bytes_recv": counters.bytes_recv, "collectives": provided}


def _run_one(case: Case, group, x: torch.Tensor) -> dict:
    x = x.to(group.device)                   # this rank's own input, to the run's device (cpu or a GPU)
    before = _snapshot(group.counters)
    ret = _call(case, x, group)
    after = _snapshot(group.counters)
    return {"x": x, "ret_is_x": ret is x, "ret_type": type(ret).__name__,
            "ret": ret if isinstance(ret, torch.Tensor) and ret is not x else None,
            "counts": {k: after[k] - before[k] for k in after}}


def run_cases_on_rank(group, cases: list[Case], inputs: list[torch.Tensor]) -> list[dict]:
    """Rank code: run every case in order on this rank's own x of each (`inputs`, made in the grading
    process); per case x after the call, the return value, counters (rank_runs.run_case_list: a stub's
    error is recorded per function, other errors stop the launch)."""
    return run_case_list(group, cases, _run_one, key=lambda c: c.fn, inputs=inputs)


def plain(value):
    """`value` as plain Python data, the only kind a rank sends back for a student's return value.

    None, bool, int, float and str stay; other numbers (numpy scalars, a one-element tensor) become
    int or float; lists, tuples and dicts are converted item by item; anything else becomes a str
    naming its type and repr. Unpickling in the grading process then never runs student code.
    """
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, (list, tuple)):
        return (tuple if isinstance(value, tuple) else list)(plain(v) for v in value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
        if type(value) in (bool, int, float):
            return value
    elif isinstance(value, numbers.Integral):
        return int(value)
    elif isinstance(value, numbers.Real):
        return float(value)
    return f"{type(value).__name__} {reprlib.repr(value)}"


def rank_ping_pong(group, sizes, repeats: int, warmup: int, peer: int):
    """Rank code: the student's ping_pong, as every rank calls it (its return value as plain data)."""
    from minitorch_dist.collectives import ping_pong
    return plain(ping_pong(group, sizes, repeats=repeats, warmup=warmup, peer=peer))


def rank_fit_alpha_beta(group, sizes, seconds):
    """Rank code: the student's fit_alpha_beta(sizes, seconds) -> (alpha, beta) as two floats, or a
    str naming what it returned when that is not a tuple of two numbers."""
    from minitorch_dist.collectives import fit_alpha_beta
    got = fit_alpha_beta(sizes, seconds)
    if isinstance(got, tuple) and len(got) == 2:
        try:
            return float(got[0]), float(got[1])
        except Exception:  # noqa: BLE001 - not two numbers: reported below
            pass
    return f"{type(got).__name__} {reprlib.repr(got)}"


BAD_INPUTS = ("op", "non-contiguous", "root")


def rank_call_bad(group, fn_name: str, bad: str):
    """Rank code: call `fn_name` with one bad argument (an unknown op, a transposed x, root=p)."""
    import minitorch_dist.collectives as collectives
    fn = getattr(collectives, fn_name)
    x = torch.ones(4, 6, device=group.device).t() if bad == "non-contiguous" else torch.ones(24, device=group.device)
    if fn_name in ("broadcast", "reduce"):
        kwargs = {"root": group.size if bad == "root" else 0}
        if fn_name == "reduce":
            kwargs["op"] = "average" if bad == "op" else "sum"
        return fn(x, group, **kwargs)
    if fn_name in ("all_gather_",):
        return fn(x, group)
    return fn(x, group, op="average" if bad == "op" else "sum")


def rank_all_but_last(group, fn_name: str, n: int):
    """Rank code: every rank but the last calls `fn_name`, so the others wait for it forever."""
    import minitorch_dist.collectives as collectives
    if group.rank == group.size - 1:
        return None
    x = torch.ones(n, device=group.device)
    return getattr(collectives, fn_name)(x, group)
