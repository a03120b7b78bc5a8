"""Homework 5 test harness, rank side: build this rank's stage, train it STEPS steps with the case's
schedule, and report its parameters, losses, messages, trace, saved-activation bytes and (on sim)
step times. The verdict is taken in the grading process (hw5_checks.py). A rank's (x, y) is made in
the grading process (hw5_inputs.py) and comes to it as its own argument: the inputs on the first
stage, the targets on the last, zeros of their shapes elsewhere (the first stage reads the batch, the
last the targets).
"""

from __future__ import annotations

import torch

from assignments.common.rank_runs import run_case_list
from assignments.hw5.tests.hw5_memory import SavedBytes
from assignments.hw5.tests.hw5_setup import (LR, MOMENTUM, STAGE_TIME, STEPS, Case, batch, batch_size, expected_lanes,
                                             loss_fn, schedule_of, stage_parts)
from minitorch_dist.pipeline.spec import split_microbatches

P2P = ("send", "isend", "recv", "irecv")


def counts(group) -> dict:
    c = group.counters
    return {"sent": c.messages_sent, "recv": c.messages_recv, "bytes_sent": c.bytes_sent, "bytes_recv": c.bytes_recv}


def make_stage(case: Case, group, m: int | None = None):
    from minitorch_dist.pipeline import PipelineStage
    stages, specs = stage_parts(case.model, group.size, m or case.m)
    j = group.rank
    return PipelineStage(stages[j].to(group.device), group, specs[j], loss_fn=loss_fn if j == group.size - 1 else None,
                         checkpoint=case.kind.startswith("ckpt"),
                         stage_time=STAGE_TIME if group.backend == "sim" else None,
                         post_ahead=group.backend != "sim")      # sim: receives posted when needed


def step_function(kind: str, p: int, m: int, validate: bool = True):
    """step(stage, x, y, optimizer, m) of a case's kind."""
    from minitorch_dist import pipeline as pp
    if kind in ("gpipe", "bad_batch"):
        return pp.gpipe_step
    if kind in ("1f1b", "bad_batch_1f1b"):
        return pp.one_f_one_b_step
    if kind.startswith("sched"):
        lanes = (pp.gpipe_schedule if kind == "sched_gpipe" else pp.one_f_one_b_schedule)(p, m)
    else:                       # 5.1 and 5.5 run the harness's own lanes: they need no 5.2-5.4 code
        lanes = expected_lanes(schedule_of(kind), p, m)
    return lambda stage, x, y, opt, n: pp.schedule_step(stage, lanes, x, y, opt, n, validate=validate)


def one_microbatch_bytes(stage, case: Case, y: torch.Tensor) -> int:
    """Bytes autograd saves for one micro-batch's forward on this stage (and its loss on the last, on
    this rank's targets y)."""
    spec = stage.spec
    x = torch.zeros(spec.in_shape, dtype=spec.in_dtype, device=stage.group.device)
    if not stage.is_first and x.is_floating_point():
        x.requires_grad_()
    target = split_microbatches(y, case.m)[0].to(stage.group.device)
    with SavedBytes() as meter:
        out = stage.module(x)
        if stage.is_last:
            out = loss_fn(out, target)
    del out
    return meter.peak


def run_training(case: Case, group, own) -> dict:
    """STEPS steps of the case's schedule on this rank's stage, on this rank's (x, y) (own)."""
    stage = make_stage(case, group)
    opt = torch.optim.SGD(stage.module.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = (t.to(group.device) for t in own)
    step = step_function(case.kind, group.size, case.m)
    one = one_microbatch_bytes(stage, case, y)
    meter, losses, peaks, times, events = SavedBytes(), [], [], [], []
    before = counts(group)
    for s in range(STEPS):
        group.barrier()
        first_event, t0 = len(group.events), group.now()
        meter.reset_peak()
        with meter:
            loss = step(stage, x, y, opt, case.m)
        times.append((t0, group.now()))
        peaks.append(meter.peak)
        losses.append(None if loss is None else float(loss))
        if s == 0:
            events = [(e.op, e.peer, e.tag, e.start, e.end) for e in group.events[first_event:] if e.op in P2P]
    after = counts(group)
    return {"params": {n: prm.detach().clone() for n, prm in stage.module.named_parameters()},
            "losses": losses, "peaks": peaks, "one": one, "times": times, "events": events,
            "counts": {k: after[k] - before[k] for k in after}, "left_in_stash": len(stage.stash),
            "in_bytes": _nbytes(stage.spec.in_shape, stage.spec.in_dtype),
            "out_bytes": _nbytes(stage.spec.out_shape, stage.spec.out_dtype)}


def _nbytes(shape, dtype) -> int:
    return torch.empty(shape, dtype=dtype, device="meta").nbytes


def run_bad_batch(case: Case, group, own=None) -> dict:
    """A valid step first (m = 2), then a batch of 2 MICRO + 1 samples with m = 2: must raise ValueError."""
    stage = make_stage(Case(case.kind, case.model, 2), group)
    opt = torch.optim.SGD(stage.module.parameters(), lr=LR)
    step = step_function(case.kind, group.size, 2)
    x, y = (t.to(group.device) for t in batch(case.model, batch_size(Case(case.kind, case.model, 2))))
    step(stage, x, y, opt, 2)
    odd_x, odd_y = (t.to(group.device) for t in batch(case.model, batch_size(Case(case.kind, case.model, 2)) + 1))
    try:
        step(stage, odd_x, odd_y, opt, 2)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - judged in the grading process
        return {"raised": type(exc).__name__, "message": str(exc), "size": odd_x.shape[0]}
    return {"raised": None, "message": "", "size": odd_x.shape[0]}


def run_generators(case: Case, group, own=None) -> dict:
    """The generated schedules for GENERATOR_SIZES, as text (pure functions; every rank computes them)."""
    from minitorch_dist import pipeline as pp
    from assignments.hw5.tests.hw5_setup import GENERATOR_SIZES
    return {name: {f"{p},{m}": [[str(a) for a in lane] for lane in gen(p, m)] for p, m in GENERATOR_SIZES}
            for name, gen in (("gpipe", pp.gpipe_schedule), ("1f1b", pp.one_f_one_b_schedule))}


def deadlocking_schedule(p: int) -> list[list[str]]:
    """Rank 0 waits for micro-batch 0's gradient before it has sent its activation: a cycle 0 -> 1 -> 0
    (each rank's own order is possible; only the two together cannot move)."""
    lanes = expected_lanes("boundary", p, 1)
    lanes[0] = ["F0", "RECV_B0", "SEND_F0", "B0"]
    return lanes


def run_deadlock(case: Case, group, own=None) -> dict:
    """The validator's ScheduleError, then the runtime's DeadlockError of the same schedule run unchecked."""
    from minitorch_dist import DeadlockError, pipeline as pp
    stage = make_stage(Case("boundary", case.model, 1), group)
    opt = torch.optim.SGD(stage.module.parameters(), lr=LR)
    x, y = batch(case.model, batch_size(Case("boundary", case.model, 1)))
    lanes, out = deadlocking_schedule(group.size), {}
    for validate in (True, False):
        try:
            pp.schedule_step(stage, lanes, x, y, opt, 1, validate=validate)
            out[validate] = ("returned", "")
        except (pp.ScheduleError, DeadlockError) as exc:
            out[validate] = (type(exc).__name__, str(exc))
    return {"validated": out[True], "unvalidated": out[False]}


def run_cases_on_rank(group, cases: list[Case], inputs: list) -> list[dict]:
    """Rank code: run every case in order on this rank's own input of each (`inputs`, made in the
    grading process: hw5_inputs.py); a stub's error is recorded per kind, others stop the launch."""
    from assignments.hw5.tests.hw5_bonus_ranks import RUNNERS
    from assignments.hw5.tests.hw5_vocab_ranks import RUNNERS as VOCAB_RUNNERS
    runners = {"generators": run_generators, "deadlock": run_deadlock, "bad_batch": run_bad_batch,
               "bad_batch_1f1b": run_bad_batch, **RUNNERS,
               **VOCAB_RUNNERS}
    return run_case_list(group, cases, lambda c, g, own: runners.get(c.kind, run_training)(c, g, own),
                         key=lambda c: c.kind, inputs=inputs)
