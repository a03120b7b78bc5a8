"""Hidden tests of homework 4: promises of the contract that the value tests do not show
(assignments/hw4/README.md, "What your code must handle").

4.1: the four conjugate ops leave the caller's tensor as it was (the provided group.all_reduce works
     in place: an op must reduce a copy). At TP size 3 on sim, each op's argument is x = exp(a), a
     tensor that exp saved for its own backward: after the forward x must still be exp(a) on every
     rank, and the backward must run and give a.grad = exp(a) * (the op's closed-form gradient).

The rank code is in this file (sent to the ranks by value); inputs are drawn here and each rank is
sent its own; the verdicts are taken here.
"""

from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch

from assignments.common.rank_runs import error_text, fail, try_launch
from assignments.common.verdicts import fail_on
from assignments.hw4.tests.hw4_setup import BATCH, COMM_KINDS, COMM_WIDTH, SEQ, WHAT

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the ranks cannot import the hidden tests

P = 3
SEED = 4400


# -- rank code ----------------------------------------------------------------------------------------------
def rank_ops_keep_their_argument(group, own: dict) -> dict:
    """Per op: x = exp(a) goes in; x right after the forward, and a.grad (or the backward's error)."""
    from minitorch_dist import tensor_parallel as tp
    ops = {"copy": tp.copy_to_region, "reduce": tp.reduce_from_region, "scatter": tp.scatter_last_dim,
           "gather": tp.gather_last_dim}
    report = {}
    for kind in COMM_KINDS:
        a = own["a"][kind].to(group.device).clone().requires_grad_()
        x = a.exp()                                 # exp saves x for its backward
        out = ops[kind](x, group)
        kept = x.detach().clone().cpu()
        try:
            (out * own["w"][kind].to(group.device)).sum().backward()
            report[kind] = {"kept": kept, "grad": a.grad.detach().cpu(), "error": None}
        except RuntimeError as err:                 # the same on every rank: the collectives stay in step
            report[kind] = {"kept": kept, "grad": None, "error": str(err).split(" Hint:")[0]}
    return report


# -- in the grading process ---------------------------------------------------------------------------------
def _inputs() -> list[dict]:
    gen = torch.Generator().manual_seed(SEED)
    shape = (BATCH, SEQ, COMM_WIDTH)
    own = [{"a": {}, "w": {}} for _ in range(P)]
    for kind in COMM_KINDS:
        for r in range(P):
            part = shape[:-1] + (COMM_WIDTH // P,)  # gather's input, scatter's output: one rank's slice
            own[r]["a"][kind] = 0.5 * torch.randn(part if kind == "gather" else shape, generator=gen,
                                                  dtype=torch.float64)
            own[r]["w"][kind] = torch.randn(part if kind == "scatter" else shape, generator=gen,
                                            dtype=torch.float64)
    return own


def _op_grad(kind: str, r: int, own: list[dict]) -> torch.Tensor:
    """The gradient of sum(op(x) * w_r) with respect to rank r's x (the op's table in the README)."""
    ws = [o["w"][kind] for o in own]
    if kind == "copy":
        return sum(ws)
    if kind == "reduce":
        return ws[r]
    if kind == "scatter":
        return torch.cat(ws, dim=-1)
    m = COMM_WIDTH // P
    return ws[r][..., r * m:(r + 1) * m]


def _differs(got, want: torch.Tensor, tol: float = 1e-12) -> str | None:
    diff = (got.to(torch.float64) - want).abs().max().item()
    return None if diff <= tol * max(1.0, want.abs().max().item()) else f"differs by {diff:.3g}"


@pytest.mark.task4_1
@pytest.mark.points(1)
@pytest.mark.time_limit(60)
def test_contract_ops_leave_the_callers_tensor_alone():
    own = _inputs()
    result, err = try_launch(rank_ops_keep_their_argument, P, (), "sim", collectives=True,
                             rank_args=[(o,) for o in own])
    if err is not None:
        fail(error_text(err))
    problems = []
    for r, rep in enumerate(result):
        for kind in COMM_KINDS:
            got, x = rep[kind], own[r]["a"][kind].exp()
            what = f"{WHAT[kind]} (TP size {P}, sim), rank {r}"
            bad = _differs(got["kept"], x)
            if bad:
                problems.append(f"{what}: the caller's tensor x {bad} from its value before the call: the op "
                                "changed its argument (group.all_reduce works in place: reduce a copy)")
            if got["error"] is not None:
                problems.append(f"{what}: x = exp(a) (saved by exp for its backward) went in, and the backward "
                                f"raised: {got['error']}")
                continue
            bad = _differs(got["grad"], x * _op_grad(kind, r, own))
            if bad:
                problems.append(f"{what}: with x = exp(a), a.grad {bad} from exp(a) times the op's gradient")
    fail_on(problems)
