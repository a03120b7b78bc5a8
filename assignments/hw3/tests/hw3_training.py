"""Homework 3 test harness, task 3.5 end to end: the provided CharTransformer trained with HookedDDP
and a compression hook, against the same training without compression.

    run_char_training(case, group)   rank code: CHAR["steps"] SGD steps of HookedDDP + the case's hook
                                     (case.data: "powersgd", "topk" or "topk_ef"); every step's loss,
                                     averaged over ranks
    uncompressed_losses()            the grading process: the same steps in one process on the whole
                                     batch (the mean of the ranks' gradients is the full batch's gradient)

Claims (CHAR["claims"], checked on the mean loss of the last 5 steps): PowerSGD of rank 2 with error
feedback ends within 0.03 of uncompressed training; top-k of 0.1% of the elements with error feedback
within 0.07; top-k without error feedback at least 0.07 above (reference: 3.077 uncompressed, 3.066
PowerSGD, 3.125 top-k with error feedback, 3.173 without, at p 2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHAR = {"vocab": 64, "d_model": 32, "heads": 4, "layers": 2, "seq": 32, "batch": 16, "steps": 60, "lr": 1.0,
        "k_per_mille": 1, "claims": {"powersgd": ("at most", 0.03), "topk_ef": ("at most", 0.07),
                                     "topk": ("at least", 0.07)}}


def _model():
    from minitorch_dist.models import CharTransformer
    c = CHAR
    return CharTransformer(c["vocab"], d_model=c["d_model"], n_heads=c["heads"], n_layers=c["layers"],
                           max_len=c["seq"], seed=0)


def _tokens():
    from minitorch_dist.data import CharTokenizer, load_text
    text = load_text()
    return CharTokenizer(text).encode(text)


def _train(model, rows, finish, average, device="cpu") -> list[float]:
    from minitorch_dist.data import char_batches
    tokens, opt, losses = _tokens(), torch.optim.SGD(model.parameters(), lr=CHAR["lr"]), []
    for step in range(CHAR["steps"]):
        x, y = (t.to(device) for t in char_batches(tokens, CHAR["batch"], CHAR["seq"], step))
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x[rows]).flatten(0, 1), y[rows].flatten())
        loss.backward()
        finish()
        opt.step()
        losses.append(average(loss.detach().clone()))
    return losses


def run_char_training(case, group) -> dict:
    from minitorch_dist import compression as cp
    from minitorch_dist.data import local_part
    model = cp.HookedDDP(_model().to(group.device), group, bucket_size_mb=25)
    if case.data == "powersgd":
        model.register_comm_hook(cp.PowerSGDState(group, matrix_approximation_rank=2, start_powerSGD_iter=2),
                                 cp.powersgd_hook)
    else:
        k = sum(p.numel() for p in model.parameters()) * CHAR["k_per_mille"] // 1000
        model.register_comm_hook(cp.CompressionState(group, cp.TopK(k), error_feedback=case.data == "topk_ef"),
                                 cp.compression_hook)
    rows = local_part(torch.arange(CHAR["batch"], device=group.device), group.rank, group.size)
    return {"losses": _train(model, rows, model.finish_gradient_synchronization,
                             lambda t: group.all_reduce(t, "avg").item(), group.device)}


def uncompressed_losses() -> list[float]:
    """The same steps without compression, in this process, on the whole batch."""
    return _train(_model(), torch.arange(CHAR["batch"]), lambda: None, lambda t: t.item())
