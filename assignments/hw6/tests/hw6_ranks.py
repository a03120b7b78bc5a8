"""Homework 6 test harness, rank side: train a case's model a few steps with the sharded piece and
report the parameters, what each step communicated, the memory tracker's figures and the times
around each block (for prefetch). The verdict is taken in the grading process (hw6_checks.py).
A rank's rows of each step's batch, and its own starting weights when the ranks start apart, are
made in the grading process (hw6_inputs.py) and come to it as its own argument.
"""

from __future__ import annotations

import torch

from assignments.common.rank_runs import attempt, run_case_list
from assignments.hw6.tests.hw6_setup import Case, batch, build_model, load_params, loss_fn, make_optimizer
from minitorch_dist.memory import MemoryTracker

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def counts(group) -> dict:
    """Calls and tensor bytes of each provided collective, point-to-point messages sent."""
    c = group.counters
    out = {op: [c.op(op).calls, c.op(op).tensor_bytes] for op in OPS}
    out["p2p"] = [c.messages_sent, c.bytes_sent]
    return out


def _delta(after: dict, before: dict) -> dict:
    return {k: [a - b for a, b in zip(after[k], before[k])] for k in after}


def build(case: Case, group, times: dict, init: dict | None = None):
    """(model to call, optimizer, FullyShardedModel or None) for the case on this rank, from the
    case's model or this rank's own starting weights `init`; the forward timing hooks go on the
    blocks before FSDP's own hooks."""
    from minitorch_dist.sharded import make_unit
    model = build_model(case)
    if init is not None:
        load_params(model, init)
    model = model.to(group.device)
    _time_blocks(model, group, times)
    cls_kwargs = make_optimizer(case, [torch.zeros(1, device=group.device, requires_grad=True)])
    cls, kwargs = type(cls_kwargs), {k: cls_kwargs.defaults[k] for k in ("lr", "weight_decay", "momentum")
                                     if k in cls_kwargs.defaults}
    if case.stage == "ddp":
        with torch.no_grad():
            for t in list(model.parameters()) + list(model.buffers()):
                group.broadcast(t.data, src=0)
        return model, make_optimizer(case, [q for q in model.parameters() if q.requires_grad]), None
    if case.stage in ("zero1", "zero2"):
        from minitorch_dist.sharded import Zero2Optimizer, ZeroOptimizer
        with torch.no_grad():
            for t in list(model.buffers()) + [q for q in model.parameters() if not q.requires_grad]:
                group.broadcast(t.data, src=0)
        if case.stage == "zero1":
            return model, ZeroOptimizer(model.parameters(), cls, group, **kwargs), None
        return model, Zero2Optimizer(model.parameters(), cls, group, bucket_numel=1500, **kwargs), None
    from minitorch_dist.sharded import FullyShardedModel, HybridShardedModel
    units = [make_unit("outer", model)] if case.model == "tiny" else None
    if case.stage == "hsdp":
        hsdp = HybridShardedModel(model, group, case.shard_size, units=units)
        return hsdp, cls([q for q in hsdp.parameters() if q.requires_grad], **kwargs), hsdp
    fsdp = FullyShardedModel(model, group, prefetch=case.prefetch, checkpoint=case.checkpoint,
                             compute_dtype=torch.bfloat16 if case.mixed else None, units=units)
    return fsdp, cls([q for q in fsdp.parameters() if q.requires_grad], **kwargs), fsdp


def _time_blocks(model, group, times: dict) -> None:
    """Hooks that write group.now() before each block's forward and when its output's gradient arrives."""
    for i, block in enumerate(getattr(model, "blocks", [])):
        block.register_forward_pre_hook(lambda m, a, i=i: times["fwd"].__setitem__(i, group.now()))


def _time_backward(model, group, times: dict) -> None:
    def after(i):
        def hook(m, a, out):
            if isinstance(out, torch.Tensor) and out.requires_grad:
                out.register_hook(lambda g: _backward_mark(times, i, group))
        return hook
    for i, block in enumerate(getattr(model, "blocks", [])):
        block.register_forward_hook(after(i))


def _backward_mark(times: dict, i: int, group) -> None:
    """Block i's output gradient arrived: note the time, and let the tracker look (mid-backward)."""
    times["bwd"][i] = group.now()
    if times.get("tracker") is not None:
        times["tracker"].sample(f"backward of block {i}")


def _full_params(case, group, model, fsdp) -> dict:
    """{name: tensor}: the model's parameters; under FSDP rebuilt from every rank's unit shards."""
    if fsdp is None:
        return {n: q.detach().clone() for n, q in model.named_parameters()}
    out = {}
    for unit in fsdp.units:
        gathered = fsdp.group.all_gather(unit.shard.detach().contiguous())    # HSDP: the shard group
        start = "" if unit.spec.module is fsdp.module else unit.spec.name + "."
        views = unit.layout.views(gathered)                      # one per slot, in order
        out.update({start + s.name: views[k].clone() for k, s in enumerate(unit.spec.slots)})
    for n, q in fsdp.module.named_parameters():
        out.setdefault(n, q.detach().clone())
    return out


def run_training(case: Case, group, own: dict | None = None) -> dict:
    """case.steps steps on this rank's rows of each step's batch (own["batches"]; None: the public
    batches, for the bad-input cases' valid run) from its starting weights (own["init"]); per step
    the collectives' deltas; memory; times; the final parameters."""
    times = {"fwd": {}, "bwd": {}}
    model, opt, fsdp = build(case, group, times, None if own is None else own["init"])
    _time_backward(fsdp.module if fsdp is not None else model, group, times)
    tracker = times["tracker"] = MemoryTracker(model, opt)
    steps, losses, grad_dtypes = [], [], []
    for step in range(case.steps):
        mine = batch(case, step, group.rank, group.size) if own is None else own["batches"][step]
        x, y = (t.to(group.device) for t in mine)
        tracker.reset_peaks()
        before, events_from = counts(group), len(group.events)
        with tracker.saved_activations():
            loss = loss_fn(case, model(x), y)
            tracker.sample("after forward")
            forward = {"peak": dict(tracker.peak), "live": tracker.sample("after forward")}
            loss.backward()
        if case.stage == "ddp":
            for q in model.parameters():
                if q.grad is not None:
                    group.all_reduce(q.grad, "avg")
        grads_at_step = tracker.sample("before step")["grads"]
        grad_dtypes = sorted({str(u.shard.grad.dtype) for u in fsdp.units if u.shard.grad is not None}) if fsdp else []
        opt.step()
        after_step = tracker.sample("after step")
        opt.zero_grad()
        losses.append(loss.item())
        steps.append({"comm": _delta(counts(group), before), "forward": forward, "grads_at_step": grads_at_step,
                      "after_step": after_step, "peak": dict(tracker.peak),
                      "events": [[e.op, e.start, e.end, e.nbytes, e.group] for e in group.events[events_from:]],
                      "fwd_times": [times["fwd"][i] for i in sorted(times["fwd"])],
                      "bwd_times": [times["bwd"][i] for i in sorted(times["bwd"])]})
        del loss
    report = {"steps": steps, "losses": losses, "params": _full_params(case, group, model, fsdp),
              "shard_numels": [u.shard.numel() for u in fsdp.units] if fsdp is not None else
              [getattr(opt, "shard", torch.zeros(0, device=group.device)).numel()]}
    if fsdp is not None:
        report["dtypes"] = {"shards": sorted({str(u.shard.dtype) for u in fsdp.units}), "grads": grad_dtypes,
                            "full": sorted({str(u.full.dtype) for u in fsdp.units})}
    if case.stage == "hsdp":                                 # each group's world ranks, by name
        report["groups"] = {g.name: list(g.ranks) for g in (fsdp.world, fsdp.shard_group, fsdp.replica_group)}
    if fsdp is not None and case.mixed:
        report["gathered"] = fsdp.full_parameters()
    return report


def run_bad_input(case: Case, group) -> dict:
    """A valid run first (a stub raises there); then the invalid construction must raise (caught here):
    bad_zero: ZeroOptimizer(params, "adamw", group) (a name, not an optimizer class);
    bad_fsdp: FullyShardedModel(nn.Linear(3, 3), group) (no `blocks`, no units given);
    bad_hsdp: HybridShardedModel(model, group, case.shard_size), shard_size not dividing p."""
    from torch import nn

    from minitorch_dist.sharded import FullyShardedModel, HybridShardedModel, ZeroOptimizer
    if case.stage == "bad_hsdp":
        run_training(Case("hsdp", model="tiny", steps=1, shard_size=1), group)
        return attempt(lambda: HybridShardedModel(build_model(case).to(group.device), group, case.shard_size))
    run_training(Case("zero1" if case.stage == "bad_zero" else "fsdp", steps=1), group)
    if case.stage == "bad_zero":
        return attempt(lambda: ZeroOptimizer(build_model(case).to(group.device).parameters(), "adamw", group, lr=0.1))
    return attempt(lambda: FullyShardedModel(nn.Linear(3, 3, device=group.device), group))


def run_cases_on_rank(group, cases: list[Case], inputs: list) -> list[dict]:
    """Rank code: run every case in order on this rank's own input of each (`inputs`, made in the
    grading process: hw6_inputs.py); a stub's error is recorded per kind, others stop the launch."""
    def run_one(case, g, own):
        return run_bad_input(case, g) if case.stage.startswith("bad_") else run_training(case, g, own)
    return run_case_list(group, cases, run_one, key=lambda c: c.kind, inputs=inputs)
