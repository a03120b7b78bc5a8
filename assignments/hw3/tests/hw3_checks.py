"""Homework 3 test harness, the verdict: taken in the grading process from what the ranks returned.

    judge(outcomes, round_trip_problems)      # fails the test with a clear message

Round trips: Uint8Quantizer within scale/2 of every element (scale = (max - min)/255 of its chunk),
grid values and constant chunks exactly; SignQuantizer +-(mean |x| of the chunk), + for x >= 0;
TopK the k largest magnitudes (ties to the lower index) and zeros elsewhere; payloads of the
documented size. All-reduces: the same result on every rank, equal to the sum (or mean) over ranks
of what each rank's payload decompresses to; for grid inputs the exact mean. How: the bytes that
went into the provided collectives are the compressed payload's, never the dense tensor's; the
quantizers and TopK all-gather (no all-reduce), RandomK all-reduces only its k values.
Error feedback: every step, residual = (g + previous residual) - what was sent, exactly; sum of the
results + sum of the final residuals = sum of all inputs, exactly (float64, dyadic inputs).
Every rank's input is the one this process made and sent it (Outcome.inputs, hw3_inputs.py).
"""

from __future__ import annotations

import torch

from assignments.common.rank_runs import judge  # noqa: F401 (the tests import it from here)
from assignments.hw3.tests.hw3_harness import Outcome
from assignments.hw3.tests.hw3_setup import (EF_STEPS, QUADRATIC, RANDOMK_STEPS, HalfGrid, chunks, payload_bytes,
                                             top_k_positions)

TOL = 1e-12


def _compare(got, want: torch.Tensor, what: str, tol: float = TOL) -> str | None:
    """None when got equals want within tol * max(1, max |want|), else what differs, where and by how much."""
    if not isinstance(got, torch.Tensor):
        return f"{what}: expected a tensor of shape {tuple(want.shape)}, got {type(got).__name__}"
    if got.shape != want.shape:
        return f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if not want.numel():
        return None
    bound = tol * max(1.0, want.abs().max().item())
    diff = (got.detach().to(torch.float64) - want).abs().nan_to_num(float("inf"))
    worst = int(diff.argmax())
    if not bool(diff[worst] <= bound):
        return (f"{what}: at [{worst}] got {got[worst].item():.10g}, expected {want[worst].item():.10g} "
                f"(|diff| {diff[worst].item():.3g}); {int((diff > bound).sum())} of {diff.numel()} values differ")
    return None


def _per_chunk(x: torch.Tensor, chunk: int):
    return [x[j * chunk:(j + 1) * chunk] for j in range(chunks(x.numel(), chunk))]


def uint8_bound(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """(n,): scale/2 of each element's chunk, plus the float32 rounding of the zero point and scale."""
    out = []
    for part in _per_chunk(x, chunk):
        lo, hi = part.min().item(), part.max().item()
        out.append(torch.full((part.numel(),), (hi - lo) / 255 / 2 + 2.0 ** -22 * (abs(lo) + abs(hi)),
                              dtype=torch.float64))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def sign_expected(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """+-(mean |x| of the chunk, as float32), + where x >= 0."""
    out = []
    for part in _per_chunk(x, chunk):
        scale = torch.tensor(part.abs().mean().item(), dtype=torch.float32).item()
        out.append(torch.where(part >= 0, scale, -scale))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def topk_expected(x: torch.Tensor, k: int) -> torch.Tensor:
    keep = top_k_positions(x, k)
    out = torch.zeros_like(x)
    out[keep] = x[keep]
    return out


def local_problems(kind: str, x: torch.Tensor, x_hat, param: int, what: str, exact: bool = False) -> list:
    """What one rank's decompress(compress(x)) must be: [problem, ...] (None entries mean none)."""
    if kind.startswith("uint8"):
        if exact:
            return [_compare(x_hat, x, f"{what} (grid values, constant and zero chunks come back exactly)", 0.0)]
        if not isinstance(x_hat, torch.Tensor) or x_hat.shape != x.shape:
            return [_compare(x_hat, x, what)]
        bound, err = uint8_bound(x, param), (x_hat.to(torch.float64) - x).abs().nan_to_num(float("inf"))
        if bool((err <= bound).all()):
            return []
        i = int((err - bound).argmax())
        return [f"{what}: element {i} (chunk {i // param}) is {x_hat[i].item():.10g}, input {x[i].item():.10g}: "
                f"error {err[i].item():.4g} > scale/2 = {bound[i].item():.4g} (scale = (max - min)/255 of its chunk); "
                f"{int((err > bound).sum())} of {x.numel()} elements too far"]
    if kind.startswith("sign"):
        return [_compare(x_hat, sign_expected(x, param), f"{what} (+-mean|x| of the chunk, + for x >= 0)", 1e-6)]
    return [_compare(x_hat, topk_expected(x, param), f"{what} (x at the {param} largest |x|, ties to the lower "
                                                     f"index; zeros elsewhere)", 0.0)]


# -- round trips --------------------------------------------------------------------------------
def round_trip_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    c, problems = o.case, []
    for r, rep in enumerate(o.ranks):
        x = o.inputs[r][0]
        problems += local_problems(c.kind, x, rep["x_hat"], c.param, f"rank {r}: decompress(compress(x))",
                                   exact=c.data == "grid")
        got = sum(t.numel() * t.element_size() for t in rep["payload"])
        want = payload_bytes(c.kind, c.n, c.param)
        if got != want:
            problems.append(f"rank {r}: the payload {rep['dtypes']} holds {got} bytes; expected {want} "
                            f"(see the docstring's Shapes line)")
        if c.kind.startswith("topk") and not all(d in ("torch.float64", "torch.int32") for d in rep["dtypes"]):
            problems.append(f"rank {r}: payload dtypes {rep['dtypes']}; expected values (float64) and int32 indices")
    return [m for m in problems if m]


# -- all-reduces --------------------------------------------------------------------------------
def _reduce(parts: list[torch.Tensor], op: str) -> torch.Tensor:
    total = torch.zeros_like(parts[0])
    for t in parts:
        total = total + t
    return total / len(parts) if op == "avg" else total


def all_reduce_problems(o: Outcome) -> list[str]:
    """Same result on every rank, equal to the sum/mean of the ranks' decompressed payloads."""
    if o.error is not None:
        return [o.error]
    c, p, problems = o.case, o.p, []
    if c.kind.startswith("randomk"):
        return randomk_problems(o)
    xs = [o.inputs[r][0] for r in range(p)]
    for r, rep in enumerate(o.ranks):
        problems += local_problems(c.kind, xs[r], rep["mine"], c.param, f"rank {r}: its own payload decompressed",
                                   exact=c.data == "grid")
    problems = [m for m in problems if m]
    want = _reduce([rep["mine"].to(torch.float64) for rep in o.ranks], c.op) if not problems else None
    if c.data == "grid":
        want = _reduce(xs, c.op)
    for r, rep in enumerate(o.ranks):
        if want is not None:
            problems.append(_compare(rep["out"], want, f"rank {r}: the result (the {c.op} over ranks of every "
                                                       f"rank's decompressed payload)"))
        if "x_kept" in rep and not rep["x_kept"]:
            problems.append(f"rank {r}: compressed_all_reduce modified its input x")
    return [m for m in problems if m]


def randomk_problems(o: Outcome) -> list[str]:
    c, p, problems = o.case, o.p, []
    for step in range(RANDOMK_STEPS):
        ids = [rep["steps"][step]["indices"].long() for rep in o.ranks]
        if any(not torch.equal(i, ids[0]) for i in ids):
            problems.append(f"step {step}: the ranks drew different indices ({[i.tolist()[:5] for i in ids]} ...): "
                            f"seed the generator from (seed, step) only, the same on every rank")
            continue
        i0 = ids[0]
        if i0.numel() != c.param or len(set(i0.tolist())) != c.param or not all(0 <= i < c.n for i in i0.tolist()):
            problems.append(f"step {step}: indices {i0.tolist()}: expected {c.param} distinct positions in [0, {c.n})")
            continue
        if step and torch.equal(i0.sort().values, o.ranks[0]["steps"][step - 1]["indices"].long().sort().values):
            problems.append(f"step {step}: the same indices as step {step - 1}: they must change from step to step")
        want = torch.zeros(c.n, dtype=torch.float64)
        want[i0] = _reduce([o.inputs[r][step][i0] for r in range(p)], c.op)
        for r, rep in enumerate(o.ranks):
            problems.append(_compare(rep["steps"][step]["values"], o.inputs[r][step][i0],
                                     f"rank {r}, step {step}: the payload's values (x at the indices)", 0.0))
            problems.append(_compare(rep["steps"][step]["out"], want, f"rank {r}, step {step}: the result "
                                     f"(the {c.op} of the ranks' values at the shared indices, zeros elsewhere)"))
    return [m for m in problems if m]


def comm_problems(o: Outcome) -> list[str]:
    """The provided collectives carried the compressed payload: its bytes, never the dense tensor's."""
    if o.error is not None:
        return [o.error]
    c, problems = o.case, []
    steps = RANDOMK_STEPS if c.kind.startswith("randomk") else EF_STEPS if c.kind.startswith("ef_") else 1
    dense = 8 * c.n * steps
    payload = steps * (c.n * 8 if c.kind == "ef_grid" else payload_bytes(c.kind, c.n, c.param))
    used, unused, how = (("all_reduce", "all_gather", "all-reduce only the values at the shared indices")
                         if c.kind.startswith("randomk") or c.kind == "ef_grid" else
                         ("all_gather", "all_reduce", "all-gather the payloads (levels of different scales "
                          "cannot be summed, and uint8 sums overflow)"))
    for r, rep in enumerate(o.ranks):
        got = rep["comm"]
        wrong = []
        if got[f"{used}_bytes"] != payload:
            wrong.append(f"{got[f'{used}_bytes']} bytes into {used} (expected {payload}: the payload"
                         + (f"; the dense tensor is {dense}" if got[f"{used}_bytes"] == dense else "") + ")")
        for op in (unused, "reduce_scatter", "broadcast"):
            if got[f"{op}_calls"]:
                wrong.append(f"{got[f'{op}_calls']} {op} calls (expected 0)")
        if got["p2p"]:
            wrong.append(f"{got['p2p']} point-to-point messages (expected 0)")
        if wrong:
            problems.append(f"rank {r}: {', '.join(wrong)}; expected: {how}")
    return problems


# -- error feedback -----------------------------------------------------------------------------
def _reference_step(kind: str, delta: torch.Tensor, k: int) -> torch.Tensor:
    if kind == "ef_grid":
        return HalfGrid().decompress(HalfGrid().compress(delta), delta.numel(), delta.dtype)
    return topk_expected(delta, k)


def error_feedback_problems(o: Outcome) -> list[str]:
    """Every step: residual = (g + residual) - sent; the result = sum of what the ranks sent; in
    total, sum of results + sum of final residuals = sum of every input (exact, float64)."""
    if o.error is not None:
        return [o.error]
    c, p, problems = o.case, o.p, []
    errors = [torch.zeros(c.n, dtype=torch.float64) for _ in range(p)]
    total_in, total_out = torch.zeros(c.n, dtype=torch.float64), torch.zeros(c.n, dtype=torch.float64)
    for step in range(EF_STEPS):
        sent = []
        for r, rep in enumerate(o.ranks):
            g = o.inputs[r][step]
            total_in += g
            delta = g + errors[r]
            sent.append(_reference_step(c.kind, delta, c.param))
            errors[r] = delta - sent[-1]
            problems.append(_compare(rep["steps"][step]["error"], errors[r],
                                     f"rank {r}, step {step}: the residual e = (g + e_before) - decompress(compress("
                                     f"g + e_before))", 0.0))
        want = _reduce(sent, "sum")
        total_out += want
        for r, rep in enumerate(o.ranks):
            problems.append(_compare(rep["steps"][step]["out"], want,
                                     f"rank {r}, step {step}: the result (sum over ranks of compress(g + e) decompressed)",
                                     0.0))
    if all(m is None for m in problems):
        final = sum(rep["steps"][-1]["error"] for rep in o.ranks)
        got = sum(rep["steps"][s]["out"] for rep in o.ranks[:1] for s in range(EF_STEPS)) + final
        problems.append(_compare(got, total_in, "sum of the results + the final residuals against the sum of "
                                                "every input (nothing may be lost)", 0.0))
    return [m for m in problems if m]


def quadratic_problems(o: Outcome) -> list[str]:
    """Error-feedback signSGD gets within QUADRATIC['ef_at_most'] (relative, by p) of the minimum."""
    if o.error is not None:
        return [o.error]
    p, q = o.p, QUADRATIC
    best = sum(c for _, c in o.inputs) / p
    most = q["ef_at_most"][min(p, 2)]
    problems = []
    for r, rep in enumerate(o.ranks):
        ef, plain = ((rep[m] - best).norm() / best.norm() for m in ("ef", "plain"))
        if not ef <= most:
            problems.append(f"rank {r}: after {q['steps']} steps error-feedback signSGD is at relative distance "
                            f"{ef:.3g} from the minimum (plain signSGD: {plain:.3g}); expected at most {most:g} "
                            f"(the reference: 2e-10 at p = 1, 0.003-0.007 at p = 2..8, where plain signSGD "
                            f"stalls at 0.01 (p = 1) and 0.08-0.26)")
        if not torch.equal(rep["ef"], o.ranks[0]["ef"]):
            problems.append(f"rank {r}: its iterate differs from rank 0's: the all-reduce must give every rank the same")
    return problems


# -- bad input ----------------------------------------------------------------------------------
def bad_input_problems(o: Outcome) -> list[str]:
    """Each bad call raised ValueError; a non-finite input's message names the tensor and the count."""
    if o.error is not None:
        return [o.error]
    problems = []
    for r, rep in enumerate(o.ranks):
        for t in rep["tries"]:
            if t["raised"] is None:
                problems.append(f"rank {r}: {t['what']} returned; expected ValueError")
            elif t["raised"] != "ValueError":
                problems.append(f"rank {r}: {t['what']} raised {t['raised']}: {t['message'][:200]}; expected ValueError")
            elif "non-finite" in t["what"]:
                name = next(n for n in ("activation", "compressed_all_reduce", "g") if n in t["what"] or n == "g")
                name = "x" if name == "compressed_all_reduce" else name
                if not t["message"].startswith(f"{name} has 3 non-finite values"):
                    problems.append(f"rank {r}: {t['what']}: ValueError({t['message'][:200]!r}) must say "
                                    f"'{name} has 3 non-finite values (nan/inf); ...' (check_finite does)")
    return problems
