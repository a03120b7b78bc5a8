"""Homework 3 test harness, task 3.6 (bonus): the compressed stage boundary, on ranks 0 and 1.

    run_boundary(case, group, counts, own)   rank code: one step of two_stage_step (provided) through
                                   the student's CompressedBoundary; what crossed, what was applied,
                                   the stages' gradients, the point-to-point bytes and messages
    run_lowrank(case, group)       rank code: LowRank's round trip of a (rows, cols) matrix
    run_bad_boundary(case, group)  rank code: bad arguments, each caught and reported
    reference_step(case, ranks, idx, targets)   the grading process: the same step recomputed from
                                   what crossed

Rank 0 is sent the tokens (idx) and rank 1 the targets, drawn from the grading's secret in the
grading process (hw3_inputs.py): neither can run the other's stage without the boundary.

The model: a float64 CharTransformer (BOUNDARY_MODEL) with untied weights, 3 blocks, an activation
(B, T, C) = (3, 7, 12) of 252 elements (21 rows of 12). A case's kind names the forward compressor's
family; LINKS[kind] gives (forward, backward) compressors that differ, so using one for the other
shows in the bytes.
"""

from __future__ import annotations

import torch

BOUNDARY_MODEL = {"vocab": 13, "d_model": 12, "heads": 3, "layers": 3, "seq": 7, "batch": 3, "seed": 5}
ACT_SHAPE = (BOUNDARY_MODEL["batch"], BOUNDARY_MODEL["seq"], BOUNDARY_MODEL["d_model"])
ACT_NUMEL = ACT_SHAPE[0] * ACT_SHAPE[1] * ACT_SHAPE[2]
# kind -> (forward, backward) compressors as (family, parameter, seed)
LINKS = {"boundary_exact": (("identity", 0, 0), ("identity", 0, 0)),
         "boundary_topk": (("topk", 40, 0), ("topk", 25, 0)),
         "boundary_uint8": (("uint8", 20, 0), ("topk", 30, 0)),
         "boundary_lowrank": (("lowrank", 2, 3), ("lowrank", 3, 8))}
LOWRANK_SHAPES = {"exact": (21, 12), "general": (9, 7)}       # lowrank_round_trip: case.data


def make_compressor(spec):
    from minitorch_dist import compression as cp
    family, param, seed = spec
    if family == "identity":
        return cp.Identity()
    if family == "topk":
        return cp.TopK(param)
    if family == "uint8":
        return cp.Uint8Quantizer(param)
    return cp.LowRank(param, BOUNDARY_MODEL["d_model"], seed=seed)


def payload_size(spec, numel: int = ACT_NUMEL) -> tuple[int, int]:
    """(bytes, tensors) of a float64 payload of `numel` elements: what one message set must carry."""
    family, param, _ = spec
    if family == "identity":
        return numel * 8, 1
    if family == "topk":
        return param * (8 + 4), 2
    if family == "uint8":
        return numel + 8 * -(-numel // param), 3
    cols = BOUNDARY_MODEL["d_model"]
    return (numel // cols + cols) * param * 8, 2


def boundary_model():
    from minitorch_dist.models import CharTransformer
    m = BOUNDARY_MODEL
    return CharTransformer(m["vocab"], d_model=m["d_model"], n_heads=m["heads"], n_layers=m["layers"],
                           max_len=m["seq"], seed=m["seed"], tie_weights=False).double()


def batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(idx, targets) (B, T) int64 from `seed` (the tests draw it from the grading's secret)."""
    gen, m = torch.Generator().manual_seed(seed), BOUNDARY_MODEL
    idx = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), generator=gen)
    return idx, torch.randint(0, m["vocab"], (m["batch"], m["seq"]), generator=gen)


class _Recorder:
    """Wraps the student's boundary: records what crossed it, calls through unchanged."""

    def __init__(self, link):
        self.link, self.seen = link, {}

    def send_activation(self, activation):
        self.seen["activation"] = activation.detach().clone()
        self.link.send_activation(activation)

    def recv_gradient(self, activation):
        applied = self.link.recv_gradient(activation)
        self.seen["applied"] = applied.detach().clone() if isinstance(applied, torch.Tensor) else None
        return applied

    def recv_activation(self, shape, dtype):
        received = self.link.recv_activation(shape, dtype)
        self.seen["received"] = received
        return received

    def send_gradient(self, received):
        self.seen["grad"] = None if received.grad is None else received.grad.detach().clone()
        self.link.send_gradient(received)


def run_boundary(case, group, counts, own) -> dict:
    """One step of the split model at boundary case.param (ranks 0 and 1; others idle): own is rank 0's
    idx or rank 1's targets; the other of the two is zeros of the same shape (two_stage_step reads idx
    on rank 0, targets and idx's shape on rank 1)."""
    from minitorch_dist import compression as cp
    if group.rank > 1:
        return {}
    forward, backward = (make_compressor(s) for s in LINKS[case.kind])
    stage = cp.split_char_transformer(boundary_model().to(group.device), case.param)[group.rank]
    link = _Recorder(cp.CompressedBoundary(group, 1 - group.rank, forward, backward))
    own = own.to(group.device)
    idx, targets = (own, torch.zeros_like(own)) if group.rank == 0 else (torch.zeros_like(own), own)
    before = counts(group)
    loss = cp.two_stage_step(group, stage, idx, targets, link)
    after = counts(group)
    seen = dict(link.seen)
    if "received" in seen:
        seen["received"] = seen["received"].detach().clone()
    return {**seen, "loss": loss, "grads": [p.grad.clone() for p in stage.parameters()],
            "bytes_sent": after["p2p_bytes"] - before["p2p_bytes"], "messages": after["p2p"] - before["p2p"],
            "collectives": sum(after[k] - before[k] for k in after if k.endswith("_calls"))}


def lowrank_input(case) -> torch.Tensor:
    """(rows, cols) float64: of rank case.param exactly ("exact"), or full rank ("general")."""
    rows, cols = LOWRANK_SHAPES[case.data]
    gen = torch.Generator().manual_seed(rows * cols + case.param)
    if case.data == "exact":
        a = torch.randn(rows, case.param, generator=gen, dtype=torch.float64)
        return a @ torch.randn(case.param, cols, generator=gen, dtype=torch.float64)
    return torch.randn(rows, cols, generator=gen, dtype=torch.float64) * torch.linspace(3, 0.1, cols,
                                                                                         dtype=torch.float64)


def run_lowrank(case, group) -> dict:
    from minitorch_dist.compression import LowRank
    x = lowrank_input(case).to(group.device)
    comp = LowRank(case.param, x.shape[1], seed=case.n)
    payload = tuple(comp.compress(x.reshape(-1).clone()))
    return {"x_hat": comp.decompress(payload, x.numel(), x.dtype), "payload": list(payload)}


def run_bad_boundary(case, group) -> dict:
    """The valid calls run first (a stub fails there); then each bad call, caught and reported."""
    from minitorch_dist import compression as cp
    from assignments.common.rank_runs import attempt
    x = torch.linspace(-2, 3, 12, dtype=torch.float64, device=group.device)
    cp.LowRank(2, 4).decompress(cp.LowRank(2, 4).compress(x), 12, x.dtype)
    bad = torch.ones(2, 3, 4, dtype=torch.float64, device=group.device)
    bad.view(-1)[[1, 4, 7]] = torch.tensor([float("nan"), float("inf"), float("-inf")], dtype=torch.float64,
                                           device=group.device)
    link = cp.CompressedBoundary(group, 1 - group.rank, cp.Identity())
    tries = [("LowRank(0, cols=4)", lambda: cp.LowRank(0, 4)), ("LowRank(2, cols=0)", lambda: cp.LowRank(2, 0)),
             ("LowRank(2, cols=5).compress(x of 12 elements)", lambda: cp.LowRank(2, 5).compress(x)),
             ("LowRank(4, cols=4).compress(x of 12 elements: a (3, 4) matrix)", lambda: cp.LowRank(4, 4).compress(x)),
             ("CompressedBoundary(group, peer=this rank, ...)",
              lambda: cp.CompressedBoundary(group, group.rank, cp.Identity())),
             (f"CompressedBoundary(group, peer={group.size}, ...)",
              lambda: cp.CompressedBoundary(group, group.size, cp.Identity())),
             ("send_gradient(a received activation whose backward never ran)",
              lambda: link.send_gradient(torch.zeros(2, 3, dtype=torch.float64, device=group.device,
                                                     requires_grad=True))),
             ("split_char_transformer(model, boundary=4) of a 3-block model",
              lambda: cp.split_char_transformer(boundary_model(), 4))]
    if group.rank == 0:
        tries.append(("send_activation(activation with 3 non-finite values)", lambda: link.send_activation(bad)))
    return {"tries": [attempt(fn, what) for what, fn in tries]}


def reference_step(case, outcome_ranks, idx: torch.Tensor, targets: torch.Tensor):
    """The grading process: the step recomputed in float64 from what crossed the boundary.

    Returns {"activation": stage 0's output, "grad": dL/d(received) and "loss" from stage 1 run on what
    rank 1 received, "grads1": stage 1's parameter gradients, "grads0": stage 0's parameter gradients
    for the gradient rank 0 says it applied, "full0"/"full1": the unsplit model's gradients}.
    """
    import torch.nn.functional as F
    from minitorch_dist.compression.stage_split import split_char_transformer
    out = {}
    stage0, stage1 = split_char_transformer(boundary_model(), case.param)
    activation = stage0(idx)
    out["activation"] = activation.detach().clone()
    received = outcome_ranks[1].get("received")
    if isinstance(received, torch.Tensor) and received.shape == ACT_SHAPE:
        x = received.detach().clone().to(torch.float64).requires_grad_(True)
        loss = F.cross_entropy(stage1(x).flatten(0, 1), targets.flatten())
        loss.backward()
        out.update(grad=x.grad.clone(), loss=loss.item(), grads1=[p.grad.clone() for p in stage1.parameters()])
    applied = outcome_ranks[0].get("applied")
    if isinstance(applied, torch.Tensor) and applied.shape == ACT_SHAPE:
        activation.backward(applied.to(torch.float64))
        out["grads0"] = [p.grad.clone() for p in stage0.parameters()]
    stage0, stage1 = split_char_transformer(boundary_model(), case.param)
    F.cross_entropy(stage1(stage0(idx)).flatten(0, 1), targets.flatten()).backward()
    out["full0"] = [p.grad.clone() for p in stage0.parameters()]
    out["full1"] = [p.grad.clone() for p in stage1.parameters()]
    return out
