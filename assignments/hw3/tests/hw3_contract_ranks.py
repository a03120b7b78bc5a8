"""Homework 3 test harness, rank side of the contract checks: promises of each task that a result
alone does not show (the payload's bit layout, the caller's global RNG and tensors left alone, the
residual kept in g's dtype, PowerSGD's step counter and matrix order with several buckets, LowRank's
start at every call). Each rank reports what it saw; the verdict is taken in the grading process.

    own = make_contract_inputs(case, p)              # test process: each rank's input, from the secret
    run_contract_cases_on_rank(group, cases, own)    # rank code: one dict per ContractCase

Kinds (ContractCase.kind):
    "sign_bits"         SignQuantizer(param) of an (n,) input: the packed bits as they are
    "randomk_rng"       RandomK(param, seed) and TopK(param), 3 compress/aggregate calls after
                        torch.manual_seed: the global RNG's state before and after, and the indices drawn
                        again under another global seed
    "ef_caller"         ErrorFeedback(TopK(param)).all_reduce('sum') for EF_STEPS steps of a (n/4, 4)
                        g of dtype `data` (values that are not dyadic): each result and residual, and
                        whether g was left as it was
    "powersgd_buckets"  powersgd_hook called on the BUCKETS of every step, in bucket order (rank param;
                        data: "ef,warm" or "plain"): each bucket's average and state.iter after each step
    "lowrank_calls"     one LowRank(param, cols, seed) compressing x, y, then x again: each round trip,
                        and the global RNG's state before and after
The inputs are drawn in the grading process from the grading's secret (assignments/common/
rank_inputs.py) and each rank is sent its own only, as in hw3_inputs.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from assignments.common.rank_inputs import seed
from assignments.common.rank_runs import run_case_list

TASK_OF = {"sign_bits": "task3_1", "randomk_rng": "task3_2", "ef_caller": "task3_3",
           "powersgd_buckets": "task3_4", "lowrank_calls": "task3_6"}
WHAT = {"sign_bits": "SignQuantizer({c}): the bits of the payload",
        "randomk_rng": "RandomK({c}, seed=5) and TopK({c}), 3 calls: the caller's global RNG",
        "ef_caller": "ErrorFeedback(TopK({c})).all_reduce(g, 'sum'), {data} g, 4 steps",
        "powersgd_buckets": "powersgd_hook rank {c} ({data}) on 3 buckets of interleaved shapes, 4 steps from "
                            "start_powerSGD_iter=2",
        "lowrank_calls": "one LowRank({c}, cols=7, seed=3) called on x, y, then x again"}

GLOBAL_SEED, RANDOMK_SEED, RNG_CALLS = 424242, 5, 3     # GLOBAL_SEED: the caller's torch.manual_seed
EF_STEPS = 4
# powersgd_buckets: three buckets per step, shapes interleaved (by_shape order differs from bucket order)
BUCKETS = [[(12, 10), (8, 14), (5,), (12, 10), (10, 3, 4), (8, 14)],
           [(6,), (16, 9), (9, 16), (3, 3), (16, 9)],
           [(12, 10), (7,), (9, 16)]]
PSGD_STEPS, PSGD_START, PSGD_SEED = 4, 2, 17
LOWRANK = {"rows": 9, "cols": 7, "seed": 3}


@dataclass(frozen=True)
class ContractCase:
    """One run on every rank: kind (see WHAT), n elements, param (chunk, k or rank), data (dtype or flags)."""

    kind: str
    n: int = 0
    param: int = 0
    data: str = ""
    tag: str = ""

    @property
    def task(self) -> str:
        return TASK_OF[self.kind]

    def describe(self, p: int) -> str:
        what = WHAT[self.kind].format(c=self.param, data=self.data)
        return f"{what} (n {self.n}, p {p})" if self.n else f"{what} (p {p})"


# -- inputs (made in the grading process) -------------------------------------------------------------------
def _gen(*key) -> torch.Generator:
    return torch.Generator().manual_seed(seed("hw3-contract", *key))


def contract_input(n: int, gen: torch.Generator, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(n,): normal values around -0.5 (spread 3), not dyadic, both signs, exact zeros at 0, 11, 22, ..."""
    x = 3.0 * torch.randn(n, generator=gen, dtype=torch.float64) - 0.5
    x[::11] = 0.0
    return x.to(dtype)


def _bucket(shapes, gen: torch.Generator, scale: float) -> list[torch.Tensor]:
    return [torch.randn(*shape, generator=gen, dtype=torch.float64) * scale for shape in shapes]


def make_contract_inputs(case: ContractCase, p: int) -> list:
    """[rank 0's input, ..., rank p-1's] of the case: sign_bits x; randomk_rng and ef_caller one x per call;
    powersgd_buckets [step][bucket] the gradients (float64, shaped as BUCKETS[b], scaled by 1 + rank);
    lowrank_calls (rows, cols) x and y of full rank."""
    key = (repr(case), p)
    if case.kind == "sign_bits":
        return [contract_input(case.n, _gen(*key, r)) for r in range(p)]
    if case.kind in ("randomk_rng", "ef_caller"):
        calls, dtype = ((RNG_CALLS, torch.float64) if case.kind == "randomk_rng" else
                        (EF_STEPS, getattr(torch, case.data)))
        return [[contract_input(case.n, _gen(*key, r, t), dtype) for t in range(calls)] for r in range(p)]
    if case.kind == "powersgd_buckets":
        return [[[_bucket(shapes, _gen(*key, r, step, b), 1.0 + r) for b, shapes in enumerate(BUCKETS)]
                 for step in range(PSGD_STEPS)] for r in range(p)]
    gen, rows, cols = _gen(*key), LOWRANK["rows"], LOWRANK["cols"]
    scale = torch.linspace(3, 0.2, cols, dtype=torch.float64)
    both = [torch.randn(rows, cols, generator=gen, dtype=torch.float64) * scale for _ in range(2)]
    return [both] * p


def psgd_flags(data: str) -> tuple[bool, bool]:
    """(use_error_feedback, warm_start) of a powersgd_buckets case."""
    on = set(data.split(","))
    return "ef" in on, "warm" in on


# -- rank code (own: this rank's input of the case, make_contract_inputs) --------------------------------------
def run_sign_bits(case: ContractCase, group, own) -> dict:
    from minitorch_dist.compression import SignQuantizer
    payload = tuple(SignQuantizer(case.param).compress(own.to(group.device)))
    return {"bits": payload[0].clone(), "dtype": str(payload[0].dtype)}


def run_randomk_rng(case: ContractCase, group, own) -> dict:
    from minitorch_dist.compression import RandomK, TopK
    torch.manual_seed(GLOBAL_SEED)
    before = torch.get_rng_state()
    randomk, topk, drawn = RandomK(case.param, RANDOMK_SEED), TopK(case.param), []
    for x in own:
        x = x.to(group.device)
        values, indices = randomk.compress(x.clone())
        randomk.decompress((values, indices), case.n, x.dtype)
        randomk.aggregate((values, indices), case.n, x.dtype, group, "avg")
        payload = topk.compress(x.clone())
        topk.decompress(payload, case.n, x.dtype)
        topk.aggregate(payload, case.n, x.dtype, group, "avg")
        drawn.append(indices.long().cpu().clone())
    kept = bool(torch.equal(before, torch.get_rng_state()))
    torch.manual_seed(GLOBAL_SEED + 1)                       # another caller's state: the same indices
    again = RandomK(case.param, RANDOMK_SEED)
    redrawn = [again.compress(x.to(group.device))[1].long().cpu().clone() for x in own]
    return {"rng_kept": kept, "indices": drawn, "indices_other_global_seed": redrawn}


def run_ef_caller(case: ContractCase, group, own) -> dict:
    from minitorch_dist.compression import ErrorFeedback, TopK
    ef, steps = ErrorFeedback(TopK(case.param)), []
    for x in own:
        g = x.to(group.device).view(case.n // 4, 4)
        before = g.clone()
        out = ef.all_reduce("w", g, group, "sum")
        error = ef.error("w")
        steps.append({"out": out.reshape(-1).clone(), "error": error.clone(), "error_dtype": str(error.dtype),
                      "g_kept": bool(torch.equal(g, before))})
    return {"steps": steps}


def run_powersgd_buckets(case: ContractCase, group, own) -> dict:
    from minitorch_dist.compression import GradBucket, PowerSGDState, powersgd_hook
    ef, warm = psgd_flags(case.data)
    state = PowerSGDState(group, matrix_approximation_rank=case.param, start_powerSGD_iter=PSGD_START,
                          use_error_feedback=ef, warm_start=warm, random_seed=PSGD_SEED)
    steps = []
    for buckets in own:
        outs = []
        for b, grads in enumerate(buckets):
            params = []
            for g in grads:
                params.append(nn.Parameter(torch.zeros(g.shape, dtype=g.dtype, device=group.device)))
                params[-1].grad = g.to(group.device)
            outs.append(powersgd_hook(state, GradBucket(b, params, len(buckets))).wait().clone())
        steps.append({"buckets": outs, "iter": state.iter})
    return {"steps": steps}


def run_lowrank_calls(case: ContractCase, group, own) -> dict:
    from minitorch_dist.compression import LowRank
    torch.manual_seed(GLOBAL_SEED)
    before = torch.get_rng_state()
    comp, outs = LowRank(case.param, LOWRANK["cols"], seed=LOWRANK["seed"]), []
    for m in own + own[:1]:                                  # x, y, then x again
        x = m.to(group.device).reshape(-1)
        outs.append(comp.decompress(tuple(comp.compress(x.clone())), x.numel(), x.dtype).clone())
    return {"x_hats": outs, "rng_kept": bool(torch.equal(before, torch.get_rng_state()))}


RUN = {"sign_bits": run_sign_bits, "randomk_rng": run_randomk_rng, "ef_caller": run_ef_caller,
       "powersgd_buckets": run_powersgd_buckets, "lowrank_calls": run_lowrank_calls}


def run_contract_cases_on_rank(group, cases: list[ContractCase], own: list) -> list[dict]:
    """Rank code: run every case in order on this rank's own inputs (a stub's error is recorded per kind,
    others stop the launch)."""
    return run_case_list(group, cases, lambda case, g, mine: RUN[case.kind](case, g, mine), key=lambda c: c.kind,
                         inputs=own)
