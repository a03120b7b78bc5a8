"""Homework 5 test harness, the verdict on the bonus tasks, taken in the grading process.

5.7 interleaved 1F1B (v = CHUNKS chunks per rank, chunk c of rank j is virtual stage c p + j of p v):
    results: every chunk's parameters after STEPS steps equal the same layers of the whole model
    trained on the whole batch (float64), losses too; how: per step 2 (p v - 1) m messages, of the
    boundaries' bytes; sim (uniform chunks of t_f / v and t_b / v, free messages, m >= p): a step
    takes (m v + p - 1)(t_f + t_b) / v, a bubble of (p - 1)/(m v + p - 1), 1F1B's divided by about v.
    Generator: valid for the validator; m = 2p+1 refused with a ValueError naming m; the compute of
    the schedule, replayed with those times (no processes), takes that long too.
5.6 data parallel over pipeline replicas (S = GRID_STAGES stages x R replicas): every rank's stage
    equals the whole model trained on the whole batch; the pipeline group is its replica's ranks
    k S .. k S + S - 1, the data group its stage's ranks j, S + j, ...; per step each rank sends
    only its pipeline's 2 m boundary messages (m on the end stages) and all-reduces its stage's gradient
    bytes once; a batch the replicas do not divide raises ValueError naming its size.
"""

from __future__ import annotations

from assignments.hw5.tests.hw5_bonus_ranks import CHUNKS, GRID_STAGES, INTERLEAVED_SIZES
from assignments.hw5.tests.hw5_checks import TOL, clock_problems, step_spans
from assignments.hw5.tests.hw5_harness import Outcome
from assignments.hw5.tests.hw5_inputs import reference
from assignments.hw5.tests.hw5_setup import STAGE_TIME, STEPS
from minitorch_dist.pipeline.actions import parse_schedule
from minitorch_dist.pipeline.validate import PAIRS, ScheduleError, validate_schedule

__all__ = ["interleaved_exact_problems", "interleaved_message_problems", "interleaved_timing_problems",
           "interleaved_generator_problems", "grid_exact_problems", "grid_layout_problems", "replayed_time"]


def _params_problems(where: str, got: dict, want: dict) -> list[str]:
    if sorted(got) != sorted(want):
        return [f"{where}: parameters {sorted(got)}, expected {sorted(want)}"]
    for name, value in want.items():
        diff = (got[name] - value).abs().max().item()
        if not diff <= TOL:
            return [f"{where}: after {STEPS} steps parameter {name} differs from the model trained on the whole "
                    f"batch by {diff:.3g} (> {TOL:g})"]
    return []


def _loss_problems(where: str, losses, expected) -> list[str]:
    if any(v is None for v in losses) or any(abs(a - b) > TOL for a, b in zip(losses, expected)):
        return [f"{where} returned losses {losses}; expected the batch's mean loss {[round(v, 12) for v in expected]}"]
    return []


# -- 5.7 interleaved ---------------------------------------------------------------------------
def interleaved_exact_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    p, v, case = o.p, CHUNKS, o.case
    want, losses = reference(case, p)
    problems = [x for j, rep in enumerate(o.ranks) for c in range(v)
                for x in _params_problems(f"rank {j}, chunk {c} (stage {c * p + j})", rep["params"][c], want[c * p + j])]
    return problems + _loss_problems(f"rank {p - 1} (last stage)", o.ranks[-1]["losses"], losses)


def interleaved_message_problems(o: Outcome) -> list[str]:
    """Per step, chunk c of rank j (stage s = c p + j) sends m activations (s < p v - 1) and m gradients (s > 0)."""
    if o.error is not None:
        return [o.error]
    p, v, m, problems = o.p, CHUNKS, o.case.m, []
    for j, rep in enumerate(o.ranks):
        n, nbytes = 0, 0
        for c, (in_b, out_b) in enumerate(rep["bytes"]):
            s = c * p + j
            n += (s < p * v - 1) + (s > 0)
            nbytes += (s < p * v - 1) * out_b + (s > 0) * in_b
        want = {"sent": STEPS * m * n, "recv": STEPS * m * n, "bytes_sent": STEPS * m * nbytes,
                "bytes_recv": STEPS * m * nbytes}
        wrong = [f"{rep['counts'][k]} {k.replace('_', ' ')} (expected {w})" for k, w in want.items() if rep["counts"][k] != w]
        if wrong:
            problems.append(f"rank {j}: {', '.join(wrong)} in {STEPS} steps; each boundary between virtual stages "
                            f"carries each micro-batch once per direction: 2(pv-1)m = {2 * (p * v - 1) * m} "
                            f"messages per step")
        if rep["left_in_stash"]:
            problems.append(f"rank {j}: its chunks' stashes still hold {rep['left_in_stash']} micro-batches")
    return problems


def interleaved_formula(p: int, v: int, m: int) -> tuple[float, float]:
    """(step time, bubble) of interleaved 1F1B with chunks of STAGE_TIME / v, for m >= p."""
    per = sum(STAGE_TIME)
    return (m * v + p - 1) * per / v, (p - 1) / (m * v + p - 1)


def interleaved_timing_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    p, m, problems = o.p, o.case.m, []
    want, bubble_want = interleaved_formula(p, CHUNKS, m)
    for s, (took, bubble) in enumerate(step_spans(o)):
        if abs(took - want) > 1e-9 or abs(bubble - bubble_want) > 1e-9:
            problems.append(f"step {s}: took {took:.6g} s simulated (bubble {bubble:.4f}); expected (mv+p-1)(t_f+t_b)/v "
                            f"= {want:.6g} s, bubble (p-1)/(mv+p-1) = {bubble_want:.4f} (1F1B's is "
                            f"{(p - 1) / (m + p - 1):.4f})")
    return problems + clock_problems(o, want)


def replayed_time(lanes, p: int, t_f: float, t_b: float) -> float:
    """The time the lanes take with F = t_f, B = t_b on every chunk, messages free, receives waiting."""
    clock, pos, sent = [0.0] * p, [0] * p, {}
    while any(pos[j] < len(lanes[j]) for j in range(p)):
        moved = False
        for j in range(p):
            while pos[j] < len(lanes[j]):
                a = lanes[j][pos[j]]
                if a.kind in ("RECV_F", "RECV_B"):
                    t = a.chunk * p + j + PAIRS[a.kind][0]
                    key = (t % p, PAIRS[a.kind][1], t // p, a.microbatch)
                    if key not in sent:
                        break
                    clock[j] = max(clock[j], sent[key])
                elif a.kind in ("SEND_F", "SEND_B"):
                    sent[j, a.kind, a.chunk, a.microbatch] = clock[j]
                else:
                    clock[j] += t_f if a.kind == "F" else t_b
                pos[j] += 1
                moved = True
        if not moved:
            raise ScheduleError("replay: no rank can move")
    return max(clock)


def interleaved_generator_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    problems, v = [], CHUNKS
    for p, m in INTERLEAVED_SIZES:
        got = o.ranks[0][f"{p},{m}"]
        name = f"interleaved_schedule({p}, {v}, {m})"
        if m == 2 * p + 1 and p > 1:
            if not isinstance(got, dict) or got["raised"] != "ValueError" or str(m) not in got["message"]:
                problems.append(f"{name}: {got if isinstance(got, dict) else 'a schedule'}; expected ValueError "
                                f"naming m = {m} (it does not split into rounds of at least p)")
            continue
        if isinstance(got, dict):
            problems.append(f"{name} raised {got['raised']}: {got['message'][:200]}")
            continue
        try:
            lanes = validate_schedule(got, m, v)
        except (ScheduleError, ValueError) as exc:
            problems.append(f"{name} is not valid: {exc}")
            continue
        if m >= p:
            took = replayed_time(parse_schedule(lanes), p, STAGE_TIME[0] / v, STAGE_TIME[1] / v)
            want, bubble = interleaved_formula(p, v, m)
            if abs(took - want) > 1e-9:
                problems.append(f"{name}: replayed with uniform chunks it takes {took:.6g} s; expected "
                                f"(mv+p-1)(t_f+t_b)/v = {want:.6g} s (bubble {bubble:.4f}): warm-up, rounds or the "
                                f"chunks' order")
    return problems


# -- 5.6 data parallel over pipeline replicas --------------------------------------------------
def grid_exact_problems(o: Outcome) -> list[str]:
    if o.error is not None:
        return [o.error]
    want, losses = reference(o.case, o.p)
    problems = [x for r, rep in enumerate(o.ranks)
                for x in _params_problems(f"rank {r} (stage {r % GRID_STAGES})", rep["params"], want[r % GRID_STAGES])]
    lasts = [rep["losses"] for r, rep in enumerate(o.ranks) if r % GRID_STAGES == GRID_STAGES - 1]
    mean = [sum(x[s] for x in lasts) / len(lasts) if None not in [x[s] for x in lasts] else None for s in range(STEPS)]
    return problems + _loss_problems("the replicas' last stages (mean)", mean, losses)


def grid_layout_problems(o: Outcome) -> list[str]:
    """Groups as documented; per step only the pipeline's messages and one average of the gradients."""
    if o.error is not None:
        return [o.error]
    S, m, problems = GRID_STAGES, o.case.m, []
    for r, rep in enumerate(o.ranks):
        k, j = divmod(r, S)
        pipe, data = list(range(k * S, k * S + S)), list(range(j, o.p, S))
        if rep["pipe_ranks"] != pipe or rep["data_ranks"] != data:
            problems.append(f"rank {r}: pipeline group {rep['pipe_ranks']}, data group {rep['data_ranks']}; expected "
                            f"{pipe} (its replica) and {data} (its stage)")
            continue
        fwd, bwd = int(j < S - 1), int(j > 0)
        want = {"sent": STEPS * m * (fwd + bwd), "bytes_sent": STEPS * m * (fwd * rep["out_bytes"] + bwd * rep["in_bytes"]),
                "all_reduce_bytes": STEPS * rep["param_bytes"]}
        wrong = [f"{rep['counts'][x]} {x.replace('_', ' ')} (expected {w})" for x, w in want.items() if rep["counts"][x] != w]
        if wrong:
            problems.append(f"rank {r}: {', '.join(wrong)} in {STEPS} steps; per step the replica's pipeline sends "
                            f"each micro-batch once per boundary and direction, and the stage's gradients are "
                            f"all-reduced once over the data group (not per micro-batch)")
        kind, text = rep["bad_share"]
        if kind != "ValueError" or str(rep["bad_size"]) not in text:
            problems.append(f"rank {r}: replica_share of {rep['bad_size']} samples over {o.p // S} replicas gave "
                            f"{kind or 'no error'} {text[:150]!r}; expected ValueError naming {rep['bad_size']}")
    return problems
