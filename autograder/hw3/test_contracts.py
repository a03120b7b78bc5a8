"""Hidden tests of homework 3: promises of each task's contract that the value tests do not show
(assignments/hw3/README.md, "What your code must handle"; rank code and inputs in
assignments/hw3/tests/hw3_contract_ranks.py, the verdict here). Inputs are drawn from the grading's
secret, each rank sent its own (assignments/common/rank_inputs.py).

3.1: SignQuantizer's payload holds element i in bit i % 8 of byte i // 8, 1 for x >= 0 (n 29 and 45,
     inputs with exact zeros): a layout that round-trips but is not the table's fails.
3.2: RandomK and TopK, three compress/decompress/aggregate calls after torch.manual_seed, leave the
     global torch RNG's state as it was, and RandomK's indices are the same under another global seed.
3.3: ErrorFeedback(TopK(3)).all_reduce, 4 steps at p 2, of a (5, 4) g whose values are not dyadic, in
     float64 and float32: g is left as it was after every call, and every residual is
     (g + e_before) - decompress(compress(g + e_before)) in g's dtype, exactly.
3.4: powersgd_hook on three buckets per step whose matrix shapes interleave ((12, 10), (8, 14), a vector,
     (12, 10), ...), 4 steps from start_powerSGD_iter 2, at p 2 (rank 2 with error feedback and warm
     start; rank 1 with neither): state.iter counts steps (1, 2, 3, 4), and every bucket's average equals
     the algorithm's replayed here (plain mean before step 2; the matrices in by_shape order, each with
     its random Q from random_qs), within 1e-9.
3.6: one LowRank(3, cols 7, seed 3) compressing x, y, then x again: each round trip is P P^T M with P
     from M Q0 and Q0 drawn from the seed (every call the same start), and the global RNG is left alone.
"""

from __future__ import annotations

import math

import pytest
import torch

from assignments.common import case_suites
from assignments.common.rank_runs import judge
from assignments.hw3.tests.hw3_contract_ranks import (BUCKETS, LOWRANK, PSGD_SEED, PSGD_START, PSGD_STEPS,
                                                      RNG_CALLS, ContractCase, make_contract_inputs, psgd_flags,
                                                      run_contract_cases_on_rank)

_, Suite = case_suites.bind(run_contract_cases_on_rank, make_inputs=make_contract_inputs, collectives=True,
                            trace=False)

SIGN = Suite(lambda p: [ContractCase("sign_bits", 29, 6), ContractCase("sign_bits", 45, 7)])
RNG = Suite(lambda p: [ContractCase("randomk_rng", 40, 6)])
EF = Suite(lambda p: [ContractCase("ef_caller", 20, 3, "float64"), ContractCase("ef_caller", 20, 3, "float32")])
POWERSGD = Suite(lambda p: [ContractCase("powersgd_buckets", param=2, data="ef,warm"),
                            ContractCase("powersgd_buckets", param=1, data="plain")])
LOWRANK_CALLS = Suite(lambda p: [ContractCase("lowrank_calls", param=3)])


def _close(got, want: torch.Tensor, what: str, tol: float) -> str | None:
    """None when got equals want within tol * max(1, max |want|) (tol 0: bit for bit), else where it differs."""
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return f"{what}: got {getattr(got, 'shape', type(got).__name__)}, expected shape {tuple(want.shape)}"
    diff = (got.detach().cpu().to(torch.float64) - want.to(torch.float64)).abs().nan_to_num(float("inf"))
    bound = tol * max(1.0, want.abs().max().item()) if want.numel() else 0.0
    if not want.numel() or bool((diff <= bound).all()):
        return None
    i = int(diff.argmax())
    return (f"{what}: at [{i}] got {got.reshape(-1)[i].item():.17g}, expected {want.reshape(-1)[i].item():.17g} "
            f"(|diff| {diff[i].item():.3g}); {int((diff > bound).sum())} of {diff.numel()} values differ")


# -- 3.1 ----------------------------------------------------------------------------------------------------
def sign_bits_problems(o) -> list[str]:
    if o.error is not None:
        return [o.error]
    c, problems = o.case, []
    for r, rep in enumerate(o.ranks):
        x, nbytes = o.inputs[r], math.ceil(c.n / 8)
        bits = rep["bits"]
        if rep["dtype"] != "torch.uint8" or tuple(bits.shape) != (nbytes,):
            problems.append(f"rank {r}: the bits are {rep['dtype']} {tuple(bits.shape)}; expected uint8 ({nbytes},)")
            continue
        got = bits.cpu().to(torch.int64)
        for i in range(c.n):
            bit = int(got[i // 8]) >> (i % 8) & 1
            if bit != int(x[i] >= 0):
                problems.append(f"rank {r}: element {i} (x = {x[i].item():.4g}) is {bit} in bit {i % 8} of byte "
                                f"{i // 8} (byte = {int(got[i // 8]):#010b}); expected {int(x[i] >= 0)}: element i "
                                f"is bit i % 8 of byte i // 8 (the lowest bit first), 1 for x >= 0")
                break
    return problems


@pytest.mark.task3_1
@pytest.mark.points(2)
def test_sign_payload_has_the_documented_bit_layout():
    judge(SIGN.outcomes(1, "sign_bits"), sign_bits_problems)


# -- 3.2 ----------------------------------------------------------------------------------------------------
def rng_problems(o) -> list[str]:
    if o.error is not None:
        return [o.error]
    problems = []
    for r, rep in enumerate(o.ranks):
        if not rep["rng_kept"]:
            problems.append(f"rank {r}: after {RNG_CALLS} calls of RandomK and TopK (compress, decompress, aggregate) "
                            "the global torch RNG's state changed: draw from a torch.Generator of your own, never "
                            "torch.manual_seed or the global RNG (the caller's random state is not yours)")
        for step, (a, b) in enumerate(zip(rep["indices"], rep["indices_other_global_seed"])):
            if not torch.equal(a, b):
                problems.append(f"rank {r}, call {step}: RandomK drew {b.tolist()[:6]}... after another "
                                f"torch.manual_seed, {a.tolist()[:6]}... before: the indices must depend on "
                                "(seed, step) only, not on the global RNG")
                break
    return problems


@pytest.mark.task3_2
@pytest.mark.points(2)
def test_random_k_leaves_the_global_rng_alone():
    judge(RNG.outcomes(2, "randomk_rng"), rng_problems)


# -- 3.3 ----------------------------------------------------------------------------------------------------
def _topk_round_trip(x: torch.Tensor, k: int) -> torch.Tensor:
    values = x.tolist()
    keep = sorted(range(len(values)), key=lambda i: (-abs(values[i]), i))[:k]
    out = torch.zeros_like(x)
    out[keep] = x[keep]
    return out


def ef_caller_problems(o) -> list[str]:
    if o.error is not None:
        return [o.error]
    c, p, problems = o.case, o.p, []
    dtype = getattr(torch, c.data)
    errors = [torch.zeros(c.n, dtype=dtype) for _ in range(p)]
    for step in range(len(o.inputs[0])):
        sent = []
        for r, rep in enumerate(o.ranks):
            got = rep["steps"][step]
            if not got["g_kept"]:
                problems.append(f"rank {r}, step {step}: ErrorFeedback.all_reduce changed the caller's g (it must "
                                "form g + e in a new tensor: g is the caller's, e.g. a parameter's .grad)")
            delta = o.inputs[r][step].reshape(-1) + errors[r]
            sent.append(_topk_round_trip(delta, c.param))
            errors[r] = delta - sent[-1]
            if got["error_dtype"] != str(dtype):
                problems.append(f"rank {r}, step {step}: the residual is {got['error_dtype']}; g is {dtype}: keep it "
                                "in g's dtype")
            problems.append(_close(got["error"], errors[r], f"rank {r}, step {step}: the residual e = (g + e_before) - "
                                   f"decompress(compress(g + e_before), n, g.dtype) ({c.data}, exactly)", 0.0))
        want = sent[0].to(torch.float64)
        for s in sent[1:]:
            want = want + s.to(torch.float64)
        for r, rep in enumerate(o.ranks):
            problems.append(_close(rep["steps"][step]["out"], want, f"rank {r}, step {step}: the result (the sum "
                                   "over ranks of what each sent)", 1e-12 if dtype == torch.float64 else 1e-6))
        if any(problems):
            break
    return [m for m in problems if m]


@pytest.mark.task3_3
@pytest.mark.points(4)
def test_error_feedback_leaves_g_alone_and_keeps_the_residual_in_its_dtype():
    judge(EF.outcomes(2, "ef_caller"), ef_caller_problems)


# -- 3.4 ----------------------------------------------------------------------------------------------------
def _gram_schmidt(x: torch.Tensor) -> torch.Tensor:
    """The columns of x orthonormalized in order (a zero column stays zero): orthogonalize_ with epsilon 0."""
    out = x.clone()
    for i in range(out.shape[1]):
        norm = torch.linalg.vector_norm(out[:, i])
        out[:, i] = out[:, i] / norm if norm > 0 else 0.0
        out[:, i + 1:] -= (out[:, i:i + 1] * out[:, i + 1:]).sum(dim=0, keepdim=True) * out[:, i:i + 1]
    return out


def powersgd_reference(case, p: int, inputs: list) -> tuple[list[list[torch.Tensor]], list[int]]:
    """Every step's averaged buckets as the hook's docstring and torch's powerSGD_hook compute them, all ranks
    replayed here from their inputs ([rank][step][bucket] gradients), and state.iter after each step."""
    from minitorch_dist.compression.low_rank import PowerSGDState, by_shape, random_qs, should_compress
    ef, warm = psgd_flags(case.data)
    state = PowerSGDState(None, matrix_approximation_rank=case.param, start_powerSGD_iter=PSGD_START,
                          use_error_feedback=ef, warm_start=warm, random_seed=PSGD_SEED)
    errors, q_memory, steps, iters = [{} for _ in range(p)], {}, [], []
    for step in range(PSGD_STEPS):
        outs = []
        for b, shapes in enumerate(BUCKETS):
            grads = [inputs[r][step][b] for r in range(p)]
            flats = [torch.cat([g.reshape(-1) for g in gs]) for gs in grads]
            if state.iter < PSGD_START:
                outs.append(sum(f / p for f in flats))
            else:
                if ef:
                    flats = [f + errors[r].get(b, torch.zeros_like(f)) for r, f in enumerate(flats)]
                views, offset = [[] for _ in range(p)], 0
                for shape in shapes:
                    size = math.prod(shape)
                    for r in range(p):
                        views[r].append(flats[r][offset:offset + size].view(shape[0], -1))
                    offset += size
                result = [sum(views[r][i] for r in range(p)) / p for i in range(len(shapes))]
                worth = [i for i, s in enumerate(shapes)
                         if should_compress(s[0], math.prod(s) // s[0], min(s[0], math.prod(s) // s[0], case.param), 2)]
                order = [next(i for i in worth if views[0][i] is m) for m in by_shape([views[0][i] for i in worth])]
                if not warm or b not in q_memory:
                    qs = [torch.empty(views[0][i].shape[1], min(*views[0][i].shape, case.param), dtype=torch.float64)
                          for i in order]
                    random_qs(state, qs)
                else:
                    qs = q_memory[b]
                new_qs = []
                for i, q in zip(order, qs):
                    q = _gram_schmidt(q)
                    pm = _gram_schmidt(sum(views[r][i] @ q for r in range(p)))
                    q = sum(views[r][i].t() @ pm for r in range(p)) / p
                    result[i] = pm @ q.t()
                    new_qs.append(q)
                out = torch.cat([t.reshape(-1) for t in result])
                if ef:
                    for r in range(p):
                        errors[r][b] = flats[r] - out
                if warm:
                    q_memory[b] = new_qs
                outs.append(out)
            if b == len(BUCKETS) - 1:
                state.iter += 1
        steps.append(outs)
        iters.append(state.iter)
    return steps, iters


def powersgd_bucket_problems(o) -> list[str]:
    if o.error is not None:
        return [o.error]
    want, iters = powersgd_reference(o.case, o.p, o.inputs)
    problems = []
    for r, rep in enumerate(o.ranks):
        for step, got in enumerate(rep["steps"]):
            if got["iter"] != iters[step]:
                problems.append(f"rank {r}: state.iter is {got['iter']} after step {step} (3 buckets a step); "
                                f"expected {iters[step]}: it counts steps, once per step at its last bucket "
                                "(state.maybe_increase_iter), so compression starts at step start_powerSGD_iter="
                                f"{PSGD_START} whatever the number of buckets")
                break
        for step, got in enumerate(rep["steps"]):
            how = ("the plain mean before start_powerSGD_iter" if step < PSGD_START else
                   "the matrices in by_shape order, each with its random Q")
            bad = next((m for m in (_close(g, w, f"rank {r}, step {step}, bucket {b}: the averaged bucket "
                                                 f"(torch's powerSGD_hook replayed here: {how})", 1e-9)
                                    for b, (g, w) in enumerate(zip(got["buckets"], want[step]))) if m), None)
            if bad:
                problems.append(bad)
                break
    return problems


@pytest.mark.task3_4
@pytest.mark.points(3)
def test_powersgd_several_buckets_of_interleaved_shapes():
    judge(POWERSGD.outcomes(2, "powersgd_buckets"), powersgd_bucket_problems)


# -- 3.6 (bonus) ----------------------------------------------------------------------------------------------
def lowrank_round_trip(m: torch.Tensor, r: int, seed: int) -> torch.Tensor:
    """P P^T M with P an orthonormal basis of span(M Q0), Q0 (cols, r) drawn from the seed."""
    q0 = torch.randn(m.shape[1], r, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    basis = torch.linalg.qr(m @ q0).Q
    return basis @ (basis.t() @ m)


def lowrank_calls_problems(o) -> list[str]:
    if o.error is not None:
        return [o.error]
    rep, r, problems = o.ranks[0], o.case.param, []
    for call, (m, got) in enumerate(zip(o.inputs[0] + o.inputs[0][:1], rep["x_hats"])):
        bad = _close(got.reshape(-1) if isinstance(got, torch.Tensor) else got,
                     lowrank_round_trip(m, r, LOWRANK["seed"]).reshape(-1),
                     f"call {call + 1} of one LowRank({r}, cols={LOWRANK['cols']}, seed={LOWRANK['seed']}) "
                     f"({'x' if call != 1 else 'y'}): P P^T M with P from M Q0, Q0 drawn from the seed at every "
                     "call", 1e-9)
        if bad:
            problems.append(bad)
            break
    if not rep["rng_kept"]:
        problems.append("LowRank.compress changed the global torch RNG's state: draw Q0 from a torch.Generator of "
                        "its own")
    return problems


@pytest.mark.task3_6
@pytest.mark.points(1)
def test_lowrank_starts_from_the_seed_at_every_call():
    judge(LOWRANK_CALLS.outcomes(1, "lowrank_calls"), lowrank_calls_problems)
