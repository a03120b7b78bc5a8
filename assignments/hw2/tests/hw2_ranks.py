"""Homework 2 test harness, rank side: the code each rank runs for a case. It only reports (the
parameters after training, per-step counters, when each all-reduce started relative to the end of
backward, the gossip values); the verdict is taken in the grading process (hw2_checks.py). What a
rank trains on or averages is made in the grading process (hw2_inputs.py) and comes to the rank as
its own argument: it holds no other rank's.
"""

from __future__ import annotations

import os

import torch

from assignments.common.rank_runs import run_case_list
from assignments.hw2.tests.hw2_setup import (Case, build_model, cross_entropy, flat_all, global_batch, load_flat,
                                             loss_of, make_optimizer, trainable_bytes)
from minitorch_dist.data import local_part

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
P2P = ("send", "recv", "isend", "irecv", "sendrecv")


def _counts(group) -> dict:
    c = group.counters
    return {"all_reduce": c.op("all_reduce").calls, "ar_bytes": c.op("all_reduce").tensor_bytes,
            "collectives": c.collective_calls(), "sent": c.messages_sent, "bytes_sent": c.bytes_sent,
            "recv": c.messages_recv, "bytes_recv": c.bytes_recv}


def _delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def _make_dp(case: Case, model, group):
    from minitorch_dist.data_parallel import AllReduceDDP, BucketedDDP, OverlapDDP
    if case.kind == "bucketed":
        return BucketedDDP(model, group, bucket_size_mb=case.bucket_kb / 1024)
    return {"allreduce": AllReduceDDP, "overlap": OverlapDDP}[case.kind](model, group)


def _dp_step(case: Case, ddp, model, opt, group, step: int, batch) -> dict:
    """One data-parallel step on this rank's part of the global batch; what happened in it."""
    x, y = (t.to(group.device) for t in batch)
    first_event, before = len(group.events), _counts(group)
    opt.zero_grad(set_to_none=True)
    in_no_sync = 0
    if case.edge == "accum":                      # 2 micro-batches: the first under no_sync
        half = x.shape[0] // 2
        with ddp.no_sync():
            (loss_of(case, ddp, x[:half], y[:half], step) / 2).backward()
        in_no_sync = _counts(group)["all_reduce"] - before["all_reduce"]
        (loss_of(case, ddp, x[half:], y[half:], step) / 2).backward()
    else:
        loss_of(case, ddp, x, y, step).backward()
    backward_end = group.now()
    ddp.finish_gradient_synchronization()
    events = [e for e in group.events[first_event:] if e.op == "all_reduce"]
    starts = [e.start - backward_end for e in events]
    ends = [e.end - backward_end for e in events]      # an async all-reduce's event ends when it is waited for
    grad_none = [p.grad is None for p in model.parameters()]
    opt.step()
    return {**_delta(_counts(group), before), "in_no_sync": in_no_sync, "starts": starts, "ends": ends,
            "grad_none": grad_none}


def run_dp(case: Case, group, own: dict) -> dict:
    """A data-parallel run on this rank's parts of the global batches (own["batches"]); edge
    "outside": rank r starts from its own weights (own["init"]), the wrapper's .module and
    named_parameters() are reported, and the parameters after every step."""
    model = build_model(case)
    if own["init"] is not None:
        load_flat(model, own["init"])
    model = model.to(group.device)
    ddp = _make_dp(case, model, group)
    opt = make_optimizer(case, model)
    steps, flats = [], []
    for s in range(case.steps):
        steps.append(_dp_step(case, ddp, model, opt, group, s, own["batches"][s]))
        flats.append(flat_all(model))
    extra = {}
    if case.edge == "outside":
        extra = {"flats": flats, "module_is_model": ddp.module is model,
                 "names": [n for n, _ in ddp.named_parameters()], "model_names": [n for n, _ in model.named_parameters()]}
    return {"params": flat_all(model), "steps": steps, "trainable_bytes": trainable_bytes(model),
            "n_trainable": sum(1 for p in model.parameters() if p.requires_grad), **extra}


def run_ps(case: Case, group, own) -> dict:
    """Rank 0 holds the global batches (own); the workers hold nothing but what rank 0 sends them."""
    from minitorch_dist.data_parallel import ParameterServer
    model = build_model(case).to(group.device)
    opt = make_optimizer(case, model) if group.rank == 0 else None
    ps = ParameterServer(model, group, cross_entropy, opt)
    first_event, steps = len(group.events), []
    for s in range(case.steps):
        before = _counts(group)
        x, y = [t.to(group.device) for t in own[s]] if group.rank == 0 else (None, None)
        loss = ps.step(x, y)
        steps.append({**_delta(_counts(group), before), "loss": loss})
    peers = sorted({e.peer for e in group.events[first_event:] if e.op in P2P and e.group == "world"})
    later_collectives = sorted({e.op for e in group.events[first_event:] if e.op in COLLECTIVES})
    return {"params": flat_all(model), "steps": steps, "peers": peers, "collective_ops": later_collectives,
            "trainable_bytes": trainable_bytes(model)}


def run_ring_gossip(case: Case, group, x: torch.Tensor) -> dict:
    from minitorch_dist.gossip import ring_gossip_
    x = x.to(group.device)
    ret = ring_gossip_(x, group)
    return {"x": x, "ret_is_x": ret is x}


def run_push_sum(case: Case, group, own: dict) -> dict:
    """case.steps push-sum steps from step case.start on this rank's own (x, w); x and w after each step."""
    from minitorch_dist.gossip import push_sum_step_
    x, w = own["x"].to(group.device), own["w"].to(group.device)
    xs, ws = [x.clone()], [w.clone()]
    for k in range(case.start, case.start + case.steps):
        push_sum_step_(x, w, group, k)
        xs.append(x.clone())
        ws.append(w.clone())
    return {"xs": xs, "ws": ws}


def run_decentralized(case: Case, group, own: dict) -> dict:
    """DPSGD or SGP: rank r starts from its own model (own["init"]) and trains on its own batches."""
    from minitorch_dist.gossip import DPSGD, SGP
    model = load_flat(build_model(case), own["init"]).to(group.device)
    trainer = (DPSGD if case.kind == "dpsgd" else SGP)(
        model, group, cross_entropy, lr=case.lr)
    w = own["w"]
    if w != 1.0:                                  # SGP's documented state: x = z * w, the model holds z
        trainer.w.fill_(w)
        trainer.x.mul_(w)
    flats, losses = [flat_all(model)], []
    for s in range(case.steps):
        losses.append(trainer.step(*[t.to(group.device) for t in own["batches"][s]]))
        flats.append(flat_all(model))
    extra = {"w": trainer.w.clone()} if case.kind == "sgp" else {}
    keep = flats if case.steps <= 4 else [flats[0], flats[-1]]
    return {"flats": keep, "losses": losses, **extra}


def run_moshpit(case: Case, group, x: torch.Tensor) -> dict:
    from minitorch_dist.gossip import moshpit_average_
    x = x.to(group.device)
    try:
        ret = moshpit_average_(x, group, side=2)
    except ValueError as exc:                     # expected when p is not a power of the side
        return {"raised": "ValueError", "message": str(exc)}
    return {"x": x, "ret_is_x": ret is x}


RUNNERS = {"ps": run_ps, "allreduce": run_dp, "overlap": run_dp, "bucketed": run_dp, "ring_gossip": run_ring_gossip,
           "push_sum": run_push_sum, "dpsgd": run_decentralized, "sgp": run_decentralized, "moshpit": run_moshpit}


def run_cases_on_rank(group, cases: list[Case], inputs: list) -> list[dict]:
    """Rank code: run every case in order on this rank's own input of each (`inputs`, made in the
    grading process: hw2_inputs.py); a stub's error is recorded per kind, others stop the launch."""
    return run_case_list(group, cases, lambda case, g, own: RUNNERS[case.kind](case, g, own), key=lambda c: c.kind,
                         inputs=inputs)


def rank_bucketed_rank_dies(group, die_rank: int, die_step: int, steps: int = 6):
    """Rank code: BucketedDDP training in which rank `die_rank` exits (os._exit) at step `die_step`."""
    case = Case("bucketed", model="deep", bucket_kb=64)
    model = build_model(case).to(group.device)
    ddp = _make_dp(case, model, group)
    opt = make_optimizer(case, model)
    for s in range(steps):
        if s == die_step and group.rank == die_rank:
            os._exit(3)
        x, y = global_batch(case, s, seed=0)          # no value is checked here: public batches
        _dp_step(case, ddp, model, opt, group, s, (local_part(x, group.rank, group.size),
                                                   local_part(y, group.rank, group.size)))
    return flat_all(model)
