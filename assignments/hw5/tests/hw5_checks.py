"""Homework 5 test harness, the verdict: taken in the grading process from what the ranks returned.

    judge(outcomes, exact_problems, message_problems, order_problems, memory_problems)

Results: after STEPS steps every stage's parameters equal the same layers of the whole model
trained on the whole batch in one process (float64, TOL), and the last stage's losses equal its
losses. How: per step, rank j sends m activations (j < p-1) and m gradients (j > 0) and receives
as many, 2(p-1)m messages in all, of the boundary's bytes. Order (read from the first step's
trace: a forward of micro-batch i is marked by the receive or send of its activation, a backward
by those of its gradient): GPipe all forwards then all backwards; 1F1B on stage j min(p-j-1, m)
forwards, then one forward and one backward in turn, then the rest. Memory (saved-tensor hooks):
the most bytes autograd held at once, in micro-batches' worth: m for GPipe, min(p-j, m) for 1F1B,
1 with checkpointing. Sim: step time (m+p-1)(t_f+t_b) and bubble (p-1)/(m+p-1).
"""

from __future__ import annotations

from assignments.common.rank_runs import judge  # noqa: F401 (the tests import it from here)
from assignments.hw5.tests.hw5_harness import Outcome
from assignments.hw5.tests.hw5_inputs import reference
from assignments.hw5.tests.hw5_setup import (GENERATOR_SIZES, STAGE_TIME, STEPS, expected_lanes, expected_order,
                                             schedule_of)
from minitorch_dist.pipeline.stage import MAX_MICROBATCHES
from minitorch_dist.pipeline.validate import ScheduleError, validate_schedule

TOL = 1e-9


def exact_problems(o: Outcome) -> list[str]:
    """Every stage's parameters after STEPS steps, and the losses, equal the one-process model's."""
    if o.error is not None:
        return [o.error]
    p, case, problems = o.p, o.case, []
    want, expected = reference(case, p)
    for j, rep in enumerate(o.ranks):
        if sorted(rep["params"]) != sorted(want[j]):
            problems.append(f"rank {j}: parameters {sorted(rep['params'])}, expected {sorted(want[j])}")
            continue
        for name, value in want[j].items():
            diff = (rep["params"][name] - value).abs().max().item()
            if not diff <= TOL:
                problems.append(f"rank {j}: after {STEPS} steps parameter {name} differs from the model trained on "
                                f"the whole batch by {diff:.3g} (> {TOL:g}); loss scaled by 1/m = 1/{case.m}? "
                                f"gradients zeroed once and one optimizer step per batch?")
                break
    losses = o.ranks[-1]["losses"]
    if any(v is None for v in losses) or any(abs(a - b) > TOL for a, b in zip(losses, expected)):
        problems.append(f"rank {p - 1} (last stage) returned losses {losses}; expected the batch's mean loss "
                        f"{[round(v, 12) for v in expected]}")
    return problems


def message_problems(o: Outcome) -> list[str]:
    """Per step: rank j sends m activations forward (j < p-1) and m gradients back (j > 0), nothing else."""
    if o.error is not None:
        return [o.error]
    p, m, problems = o.p, o.case.m, []
    for j, rep in enumerate(o.ranks):
        fwd, bwd = int(j < p - 1), int(j > 0)
        want = {"sent": STEPS * m * (fwd + bwd), "recv": STEPS * m * (fwd + bwd),
                "bytes_sent": STEPS * m * (fwd * rep["out_bytes"] + bwd * rep["in_bytes"]),
                "bytes_recv": STEPS * m * (fwd * rep["out_bytes"] + bwd * rep["in_bytes"])}
        wrong = [f"{rep['counts'][k]} {k.replace('_', ' ')} (expected {v})" for k, v in want.items() if rep["counts"][k] != v]
        if wrong:
            problems.append(f"rank {j}: {', '.join(wrong)} in {STEPS} steps; per step a stage sends each micro-batch's "
                            f"activation forward once and its input's gradient back once: 2(p-1)m = "
                            f"{2 * (p - 1) * m} messages in the whole pipeline")
        if rep["left_in_stash"]:
            problems.append(f"rank {j}: stage.stash still holds {rep['left_in_stash']} micro-batches after the step; "
                            f"backward_step frees what forward_step kept")
    return problems


def trace_order(events) -> list[str]:
    """The forwards and backwards of one rank in the order the trace shows them (see the module docstring)."""
    marks = []
    for op, _peer, tag, start, end in events:
        when = start if op in ("send", "isend") else end
        marks.append((when, ("F" if tag < MAX_MICROBATCHES else "B") + str(tag % MAX_MICROBATCHES)))
    return list(dict.fromkeys(mark for _, mark in sorted(marks, key=lambda x: x[0])))


def order_problems(o: Outcome) -> list[str]:
    """The first step's forwards and backwards on each rank, read from the trace, in the schedule's order
    (on gloo and mpi; on sim a send and a receive often share one instant, so their order is not told)."""
    if o.error is not None:
        return [o.error]
    if o.backend == "sim":
        return []
    schedule, problems = schedule_of(o.case.kind), []
    for j, rep in enumerate(o.ranks):
        got, want = trace_order(rep["events"]), expected_order(schedule, j, o.p, o.case.m)
        if o.p > 1 and got != want:
            problems.append(f"rank {j}: the trace shows {' '.join(got)}; {schedule} runs {' '.join(want)} on stage {j}")
    return problems


def expected_live(kind: str, j: int, p: int, m: int) -> int:
    if kind.startswith("ckpt"):
        return 1
    return min(p - j, m) if kind.endswith("1f1b") else 1 if kind == "boundary" else m


def memory_problems(o: Outcome) -> list[str]:
    """Peak saved-tensor bytes per step = (micro-batches alive) x (one micro-batch's saved bytes)."""
    if o.error is not None:
        return [o.error]
    problems = []
    for j, rep in enumerate(o.ranks):
        want = expected_live(o.case.kind, j, o.p, o.case.m)
        live = [peak / rep["one"] for peak in rep["peaks"]]
        if any(abs(x - want) >= 0.5 for x in live):
            why = {"ckpt": "with checkpointing a stage keeps only inputs and recomputes one micro-batch at a time",
                   "1f1b": f"1F1B keeps at most p - j = {o.p - j} micro-batches alive on stage {j}",
                   "gpipe": "GPipe keeps every micro-batch alive until the backwards"}
            key = "ckpt" if o.case.kind.startswith("ckpt") else schedule_of(o.case.kind)
            problems.append(f"rank {j}: autograd held up to {max(live):.2f} micro-batches of saved activations "
                            f"({max(rep['peaks'])} bytes, {rep['one']} per micro-batch); expected {want}: "
                            f"{why.get(key, 'one micro-batch at a time')}")
    return problems


def step_spans(o: Outcome) -> list[tuple[float, float]]:
    """(simulated seconds, bubble) of each step: first rank's start to last rank's end; the bubble is
    the share of it a stage spends idle, 1 - m (t_f + t_b) / took."""
    spans = []
    for s in range(STEPS):
        took = max(rep["times"][s][1] for rep in o.ranks) - min(rep["times"][s][0] for rep in o.ranks)
        spans.append((took, 1 - o.case.m * sum(STAGE_TIME) / took if took > 0 else float("nan")))
    return spans


def timing_problems(o: Outcome) -> list[str]:
    """Sim, uniform stages, free messages: step time (m+p-1)(t_f+t_b) and bubble (p-1)/(m+p-1)."""
    if o.error is not None:
        return [o.error]
    p, m, per = o.p, o.case.m, sum(STAGE_TIME)
    problems = []
    for s, (took, bubble) in enumerate(step_spans(o)):
        if abs(took - (m + p - 1) * per) > 1e-9 or abs(bubble - (p - 1) / (m + p - 1)) > 1e-9:
            problems.append(f"step {s}: took {took:.6g} s simulated (bubble {bubble:.4f}); expected (m+p-1)(t_f+t_b) = "
                            f"{(m + p - 1) * per:.6g} s, bubble (p-1)/(m+p-1) = {(p - 1) / (m + p - 1):.4f}: a stage "
                            f"must start each micro-batch as soon as its input is there")
    return problems + clock_problems(o, (m + p - 1) * per)


def clock_problems(o: Outcome, step: float) -> list[str]:
    """The run's own simulated time (set when the case ran alone; in a grading the sim engine's clock,
    which no rank can write) against STEPS steps of `step` seconds back to back: the step times the
    ranks recorded are theirs to write, this is not."""
    if o.sim_time is None or abs(o.sim_time - STEPS * step) <= 1e-9:
        return []
    return [f"the run took {o.sim_time:.6g} s simulated in all; expected {STEPS} steps of {step:.6g} s back to "
            f"back = {STEPS * step:.6g} s (no group.compute() but the stages' own)"]


def bad_batch_problems(o: Outcome) -> list[str]:
    """A batch that m does not divide raises ValueError naming the batch size."""
    if o.error is not None:
        return [o.error]
    problems = []
    for j, rep in enumerate(o.ranks):
        if rep["raised"] != "ValueError" or str(rep["size"]) not in rep["message"]:
            problems.append(f"rank {j}: a batch of {rep['size']} samples with m = 2 gave "
                            f"{rep['raised'] or 'no error'} {rep['message'][:200]!r}; expected ValueError naming the size "
                            f"{rep['size']} (split_microbatches does this)")
    return problems


def generator_problems(o: Outcome) -> list[str]:
    """Each generated schedule is valid (validate_schedule) and is exactly GPipe's / 1F1B's actions."""
    if o.error is not None:
        return [o.error]
    problems = []
    for name in ("gpipe", "1f1b"):
        for p, m in GENERATOR_SIZES:
            lanes = o.ranks[0][name][f"{p},{m}"]
            try:
                validate_schedule(lanes, m)
            except (ScheduleError, ValueError) as exc:
                problems.append(f"{name}_schedule({p}, {m}) is not valid: {exc}")
                continue
            want = expected_lanes(name, p, m)
            for j in range(p):
                if lanes[j] != want[j]:
                    problems.append(f"{name}_schedule({p}, {m}), rank {j}: {' '.join(lanes[j])}; expected "
                                    f"{' '.join(want[j])}")
    return problems


def deadlock_problems(o: Outcome) -> list[str]:
    """Validated: ScheduleError naming the cycle; unvalidated: the runtime's wait-for report 0 -> 1 -> 0."""
    if o.error is not None:
        return [o.error]
    problems = []
    for j, rep in enumerate(o.ranks):
        kind, text = rep["validated"]
        if kind != "ScheduleError" or "cycle" not in text or "rank 0" not in text:
            problems.append(f"rank {j}: validated, the deadlocking schedule gave {kind}: {text[:200]}")
        kind, text = rep["unvalidated"]
        if kind != "DeadlockError" or "wait-for cycle: 0 -> 1 -> 0" not in text:
            problems.append(f"rank {j}: run without validation it gave {kind}: {text[:300]}; expected the runtime's "
                            f"DeadlockError with the wait-for cycle 0 -> 1 -> 0 (receives block, sends do not)")
    return problems


__all__ = ["judge", "exact_problems", "message_problems", "order_problems", "memory_problems", "timing_problems",
           "bad_batch_problems", "step_spans", "generator_problems", "deadlock_problems", "trace_order", "expected_order"]
