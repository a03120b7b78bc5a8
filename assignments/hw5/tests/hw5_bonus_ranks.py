"""Homework 5 test harness, rank side of the bonus tasks: 5.6 (data parallel over pipeline replicas)
and 5.7 (interleaved 1F1B). Each rank reports plain data; the verdict is in hw5_bonus_checks.py. A
rank's (x, y) is made in the grading process (hw5_inputs.py): the whole batch's shape, with the
inputs only where this rank's stage reads them (the first, of its replica's rows in 5.6), the
targets only on the last; zeros elsewhere.
"""

from __future__ import annotations

import torch

from assignments.hw5.tests.hw5_setup import (LR, MICRO, MOMENTUM, STAGE_TIME, STEPS, Case, batch, loss_fn,
                                             stage_parts)

CHUNKS = 2                     # v of the interleaved cases
GRID_STAGES = 2                # S of the 2D cases: p ranks = S stages x p/S replicas
# (p, m) of interleaved_schedule(p, CHUNKS, m) that the generator test asks for; m = 2p+1 must be refused
INTERLEAVED_SIZES = ((2, 2), (2, 3), (2, 4), (2, 5), (3, 2), (3, 3), (3, 4), (3, 6), (3, 7), (4, 4), (4, 5),
                     (4, 8), (4, 9))


def counts(group) -> dict:
    c = group.counters
    return {"sent": c.messages_sent, "recv": c.messages_recv, "bytes_sent": c.bytes_sent, "bytes_recv": c.bytes_recv,
            "all_reduce_bytes": c.op("all_reduce").tensor_bytes}


def _nbytes(shape, dtype) -> int:
    return torch.empty(shape, dtype=dtype, device="meta").nbytes


def _train(group, step, params, own) -> dict:
    """STEPS steps of step(x, y) -> loss on this rank's (x, y) (own); losses, (start, end) times and the
    messages they took."""
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    x, y = (t.to(group.device) for t in own)
    losses, times = [], []
    before = counts(group)
    for _ in range(STEPS):
        group.barrier()
        t0 = group.now()
        loss = step(x, y, opt)
        times.append((t0, group.now()))
        losses.append(None if loss is None else float(loss))
    after = counts(group)
    return {"losses": losses, "times": times, "counts": {k: after[k] - before[k] for k in after}}


def run_interleaved(case: Case, group, own) -> dict:
    """STEPS steps of interleaved_schedule(p, CHUNKS, m) run by the executor on this rank's chunks."""
    from minitorch_dist import pipeline as pp
    p, v = group.size, CHUNKS
    modules, specs = stage_parts(case.model, p * v, case.m)
    modules = [m.to(group.device) for m in modules]
    stage_time = tuple(t / v for t in STAGE_TIME) if group.backend == "sim" else None
    chunks = pp.chunk_stages(modules, specs, group, v, loss_fn=loss_fn, stage_time=stage_time,
                             post_ahead=group.backend != "sim")
    lanes = pp.interleaved_schedule(p, v, case.m)
    out = _train(group, lambda x, y, opt: pp.schedule_step(chunks, lanes, x, y, opt, case.m),
                 [prm for c in chunks for prm in c.module.parameters()], own)
    out["params"] = [{n: prm.detach().clone() for n, prm in c.module.named_parameters()} for c in chunks]
    out["bytes"] = [(_nbytes(c.spec.in_shape, c.spec.in_dtype), _nbytes(c.spec.out_shape, c.spec.out_dtype))
                    for c in chunks]
    out["left_in_stash"] = sum(len(c.stash) for c in chunks)
    return out


def run_interleaved_generators(case: Case, group, own=None) -> dict:
    """interleaved_schedule(p, CHUNKS, m) for INTERLEAVED_SIZES: the lanes as text, or the error raised."""
    from minitorch_dist import pipeline as pp
    out = {}
    for p, m in INTERLEAVED_SIZES:
        try:
            out[f"{p},{m}"] = [[str(a) for a in lane] for lane in pp.interleaved_schedule(p, CHUNKS, m)]
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - judged in the grading process
            out[f"{p},{m}"] = {"raised": type(exc).__name__, "message": str(exc)}
    return out


def run_data_parallel(case: Case, group, own) -> dict:
    """STEPS steps of data_parallel_step: GRID_STAGES stages x p/GRID_STAGES replicas, 1F1B in each replica,
    on the whole batch of (replicas x m) micro-batches."""
    from minitorch_dist import pipeline as pp
    pipe, data = pp.pipeline_grid(group, GRID_STAGES)
    replicas = group.size // GRID_STAGES
    stages, specs = stage_parts(case.model, GRID_STAGES, replicas * case.m)
    j = pipe.rank
    stage = pp.PipelineStage(stages[j].to(group.device), pipe, specs[j],
                             loss_fn=loss_fn if j == GRID_STAGES - 1 else None)
    lanes = pp.one_f_one_b_schedule(GRID_STAGES, case.m)
    out = _train(group, lambda x, y, opt: pp.data_parallel_step(stage, data, lanes, x, y, opt, case.m),
                 list(stage.module.parameters()), own)
    out.update(params={n: prm.detach().clone() for n, prm in stage.module.named_parameters()},
               pipe_ranks=list(pipe.ranks), data_ranks=list(data.ranks), stage=j,
               param_bytes=sum(prm.nbytes for prm in stage.module.parameters()),
               in_bytes=_nbytes(stage.spec.in_shape, stage.spec.in_dtype),
               out_bytes=_nbytes(stage.spec.out_shape, stage.spec.out_dtype), left_in_stash=len(stage.stash))
    x = batch(case.model, MICRO[case.model] * replicas * case.m)[0].to(group.device)     # public: a shape
    try:                                 # a batch the replicas do not divide: a clear error
        pp.replica_share(x[:-1], data)
        out["bad_share"] = (None, "")
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - judged in the grading process
        out["bad_share"] = (type(exc).__name__, str(exc))
    out["bad_size"] = x.shape[0] - 1
    return out


RUNNERS = {"interleaved": run_interleaved, "interleaved_generators": run_interleaved_generators,
           "data_parallel": run_data_parallel}
__all__ = ["RUNNERS", "CHUNKS", "GRID_STAGES", "INTERLEAVED_SIZES"]
