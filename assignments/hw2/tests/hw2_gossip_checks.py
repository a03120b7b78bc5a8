"""Homework 2 test harness, the verdict on gossip (2.5-2.7), taken in the grading process.

ring_gossip_, push-sum and moshpit get float64 inputs that are small multiples of 6 or 8, so
their closed forms are computed exactly here and compared bit for bit. D-PSGD and SGP runs are
replayed here, all p ranks in one process, and compared within hw2_checks.TOL. Every input is the
one this process made and sent (Outcome.inputs, hw2_inputs.py), never what a rank reports it started
from.
"""

from __future__ import annotations

import functools

import torch

from assignments.common.rank_inputs import secret
from assignments.hw2.tests.hw2_checks import TOL
from assignments.hw2.tests.hw2_harness import Outcome
from assignments.hw2.tests.hw2_inputs import decentralized
from assignments.hw2.tests.hw2_setup import Case, build_model, flat_all, load_flat, loss_of
from minitorch_dist.gossip import exponential_peers


def _exact(got, want: torch.Tensor, what: str) -> str | None:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: expected a {want.dtype} tensor of shape {tuple(want.shape)}, got {got!r:.80}"
    bad = got != want
    if bool(bad.any()):
        i = tuple(int(k) for k in bad.nonzero()[0])
        return f"{what}{list(i)} = {got[i].item()!r}, expected {want[i].item()!r} ({int(bad.sum())} values differ)"
    return None


def ring_gossip_problems(o: Outcome) -> list[str]:
    """x becomes the mean of this rank's x and its ring neighbours' (exactly); sum_i x_i is kept."""
    if o.error is not None:
        return [o.error]
    p, xs = o.p, o.inputs
    problems = []
    for r, rep in enumerate(o.ranks):
        if p == 1:
            want = xs[0]
        elif p == 2:
            want = (xs[0] + xs[1]) / 2
        else:
            want = (xs[(r - 1) % p] + xs[r] + xs[(r + 1) % p]) / 3
        msg = _exact(rep["x"], want, f"rank {r}: x")
        if msg:
            problems.append(msg + " (the mean of x on ranks r-1, r, r+1)")
        if not rep["ret_is_x"]:
            problems.append(f"rank {r}: ring_gossip_ must work in place on x and return x itself")
    if not problems and not torch.equal(sum(rep["x"] for rep in o.ranks), sum(xs)):
        problems.append("the sum of x over ranks changed")
    return problems


def push_sum_problems(o: Outcome) -> list[str]:
    """Each step: (x, w) on rank r = half its own + half its in-peer's, exactly; sums of x and w kept."""
    if o.error is not None:
        return [o.error]
    p, problems = o.p, []
    exact = o.case.seed in (0, 2)
    seq = _sequences(o)
    w0 = sum(float(seq[r]["ws"][0]) for r in range(p))
    for k in range(o.case.steps):
        step = o.case.start + k
        for r in range(p):
            src = exponential_peers(r, p, step)[1] if p > 1 else r
            for name, key in (("x", "xs"), ("w", "ws")):
                before = seq[r][key][k]
                want = before if p == 1 else before / 2 + seq[src][key][k] / 2
                got = seq[r][key][k + 1]
                msg = _exact(got, want, f"step {step}, rank {r}: {name}") if exact or name == "w" else (
                    None if torch.allclose(got, want, rtol=0, atol=TOL) else f"step {step}, rank {r}: {name} = "
                    f"{got.flatten()[:3].tolist()}..., expected {want.flatten()[:3].tolist()}...")
                if msg:
                    problems.append(msg + f" (half of its own plus half of rank {src}'s, the in-peer at this step)")
        total_w = sum(float(seq[r]["ws"][k + 1]) for r in range(p))
        if total_w != w0:
            problems.append(f"after step {step}: sum of w over ranks = {total_w!r}, must stay exactly {w0!r} "
                            f"(p when every w starts at 1)")
        total = sum(seq[r]["xs"][k + 1] for r in range(p))
        if exact and not torch.equal(total, sum(seq[r]["xs"][0] for r in range(p))):
            problems.append(f"after step {step}: the sum of x over ranks changed")
        if problems:
            break
    return problems


def _sequences(o: Outcome) -> list[dict]:
    """Each rank's x and w before the first step (the inputs this process sent) and after each step
    (what the rank reported)."""
    return [{"xs": [o.inputs[r]["x"]] + list(rep["xs"][1:]), "ws": [o.inputs[r]["w"]] + list(rep["ws"][1:])}
            for r, rep in enumerate(o.ranks)]


def _initial_mean(o: Outcome) -> torch.Tensor:
    return sum(o.inputs[r]["x"] for r in range(o.p)) / o.p


def exact_mean_problems(o: Outcome) -> list[str]:
    """p a power of two: after log2 p steps every rank's z = x / w is the mean of the initial x."""
    if o.error is not None:
        return [o.error]
    mean = _initial_mean(o)
    problems = []
    for r, rep in enumerate(o.ranks):
        msg = _exact(rep["xs"][-1] / rep["ws"][-1], mean, f"rank {r}: z = x / w after {o.case.steps} steps")
        if msg:
            problems.append(msg + " (the exact mean of the initial x)")
    return problems


def consensus_distances(o: Outcome) -> list[float]:
    """max over ranks of |z_r - mean z_0| after each step (index 0: before any step)."""
    mean = _initial_mean(o)
    return [max(float((rep["xs"][k] / rep["ws"][k] - mean).abs().max()) for rep in _sequences(o))
            for k in range(o.case.steps + 1)]


def consensus_problems(o: Outcome, shrink: float) -> list[str]:
    """Not a power of two: the consensus distance falls by `shrink` over the run, and never grows
    over a round of ceil(log2 p) steps."""
    if o.error is not None:
        return [o.error]
    d = consensus_distances(o)
    m = max(1, (o.p - 1).bit_length())
    rounds = d[::m]
    if d[-1] > shrink * d[0] or any(b > a for a, b in zip(rounds, rounds[1:])):
        return [f"consensus distance max_r |z_r - mean| per round of {m} steps: "
                f"{[f'{v:.3g}' for v in rounds]}; it must fall below {shrink:g} x {d[0]:.3g} by step "
                f"{o.case.steps} and never grow"]
    return []


def decentralized_reference(case: Case, p: int) -> tuple[list[list[torch.Tensor]], list[list[float]]]:
    """(flat parameters of every rank after each step, losses of each step per rank): the D-PSGD or
    SGP formulas on all p ranks in this process (rank r starts from its own weights and trains on its
    own batches: hw2_inputs.decentralized, what each rank was sent)."""
    return _decentralized_reference(case, p, secret())


@functools.lru_cache(maxsize=16)
def _decentralized_reference(case: Case, p: int, _secret: bytes):
    inits, own, w = decentralized(case, p)
    models = [load_flat(build_model(case), init) for init in inits]
    w = list(w)
    x = [flat_all(m) * w[r] for r, m in enumerate(models)]       # the models hold z = x / w
    flats, losses = [[flat_all(m) for m in models]], []
    for s in range(case.steps):
        grads, step_losses = [], []
        for r, m in enumerate(models):
            m.zero_grad(set_to_none=True)
            loss = loss_of(case, m, *own[r][s], s)
            loss.backward()
            grads.append(torch.cat([q.grad.reshape(-1) for q in m.parameters()]))
            step_losses.append(loss.item())
        if case.kind == "dpsgd":
            cur = [flat_all(m) for m in models]
            mixed = cur if p == 1 else [(cur[r] + cur[1 - r]) / 2 for r in range(p)] if p == 2 else [
                (cur[(r - 1) % p] + cur[r] + cur[(r + 1) % p]) / 3 for r in range(p)]
            z = [mixed[r] - case.lr * grads[r] for r in range(p)]
        else:
            x = [x[r] - case.lr * grads[r] for r in range(p)]
            if p > 1:
                src = [exponential_peers(r, p, s)[1] for r in range(p)]
                x, w = [x[r] / 2 + x[src[r]] / 2 for r in range(p)], [w[r] / 2 + w[src[r]] / 2 for r in range(p)]
            z = [x[r] / w[r] for r in range(p)]
        for m, v in zip(models, z):
            torch.nn.utils.vector_to_parameters(v, m.parameters())
        flats.append([v.clone() for v in z])
        losses.append(step_losses)
    return flats, losses


def decentralized_problems(o: Outcome) -> list[str]:
    """Every rank's model after each step equals the D-PSGD / SGP formula (within TOL); losses too."""
    if o.error is not None:
        return [o.error]
    flats, losses = decentralized_reference(o.case, o.p)
    problems = []
    for r, rep in enumerate(o.ranks):
        for s, got in enumerate(rep["flats"][1:], start=1):
            diff = float((got - flats[s][r]).abs().max()) if got.shape == flats[s][r].shape else float("inf")
            if not diff <= TOL:
                problems.append(f"rank {r}: parameters after step {s} differ from the {o.case.kind.upper()} formula "
                                f"by up to {diff:.3g} (tolerance {TOL:g})")
                break
        got_losses = rep["losses"]
        if len(got_losses) != o.case.steps or any(abs(a - losses[s][r]) > TOL for s, a in enumerate(got_losses)):
            problems.append(f"rank {r}: step() returned losses {got_losses}; expected {[v[r] for v in losses]} "
                            f"(this rank's loss before the step)")
    if o.case.kind == "sgp" and sum(float(rep["w"]) for rep in o.ranks) != o.p:
        problems.append(f"SGP: the push-sum weights sum to {sum(float(rep['w']) for rep in o.ranks)!r}, not p = {o.p}")
    return problems


def moshpit_problems(o: Outcome) -> list[str]:
    """p = 2^d: every rank holds the exact mean; otherwise every rank raised ValueError naming p."""
    if o.error is not None:
        return [o.error]
    if o.p & (o.p - 1):
        bad = [r for r, rep in enumerate(o.ranks)
               if rep.get("raised") != "ValueError" or str(o.p) not in rep["message"]]
        return [f"p={o.p} is not a power of 2: ranks {bad} must raise ValueError naming p (before any message); "
                f"got {[o.ranks[r].get('raised') or 'a result' for r in bad]}"] if bad else []
    mean = sum(o.inputs) / o.p
    problems = [m for r, rep in enumerate(o.ranks) if (m := _exact(rep.get("x"), mean, f"rank {r}: x"))]
    problems += [f"rank {r}: moshpit_average_ must work in place and return x itself"
                 for r, rep in enumerate(o.ranks) if "x" in rep and not rep["ret_is_x"]]
    return problems
