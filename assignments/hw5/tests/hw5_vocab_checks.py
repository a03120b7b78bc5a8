"""Homework 5 test harness, the verdict on bonus 5.8, taken in the grading process.

Shards: rank r holds ids [r (V // p) + min(r, V mod p), ...), V // p of them plus one on the first
V mod p ranks. Results (float64, relative tolerance TOL): the embedding's output on rank 0, the
loss on every rank, the hidden state's gradient on the last rank and every rank's rows of both
weights' gradients equal the unsharded layers' (torch's cross-entropy, autograd); the pipeline's
shares after STEPS steps equal the whole model trained on the whole batch. How (N tokens of width
C, 8-byte floats): rank r sends one (N, C) part to rank 0 (r > 0) and one to rank p-1 (r < p-1),
nothing else point to point; broadcasts of 2 N C values (h and the embedding's gradient); all-
reduces of 3 N values (max, sum of exp, target logit). A vocabulary smaller than p is refused with
a ValueError naming its size.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from assignments.common.rank_inputs import secret
from assignments.hw5.tests.hw5_harness import Outcome
from assignments.hw5.tests.hw5_inputs import expected_rows, layer_inputs_of, vocab_pipeline_of
from assignments.hw5.tests.hw5_setup import LR, MOMENTUM, STEPS
from assignments.hw5.tests.hw5_vocab_ranks import MICRO_ROWS, VOCAB_V, WIDTH

TOL = 1e-9
__all__ = ["expected_rows", "layer_problems", "layer_message_problems", "pipeline_problems"]


def _close(where: str, got, want) -> list[str]:
    if got is None or not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        return [f"{where}: got {'None' if got is None else tuple(getattr(got, 'shape', ()))}, expected a tensor of "
                f"shape {tuple(want.shape)}"]
    scale = max(1.0, want.abs().max().item())
    diff = (got - want).abs().max().item()
    if not diff <= TOL * scale:
        return [f"{where} differs from the unsharded layers' by {diff:.3g} (values up to {scale:.3g}): the global "
                f"max subtracted on every rank? shard offsets? the mean over all tokens? every rank's part summed?"]
    return []


def _layer_reference(o: Outcome) -> dict:
    return _layer_reference_of(o.case, o.p, secret())


@functools.lru_cache(maxsize=None)
def _layer_reference_of(case, p: int, _secret: bytes) -> dict:
    x = layer_inputs_of(case, p)
    head = x["head"].clone().requires_grad_()
    hidden = x["hidden"].clone().requires_grad_()
    loss = F.cross_entropy((hidden @ head.T).view(-1, VOCAB_V), x["target"].view(-1))
    loss.backward()
    flat_idx = x["idx"].view(-1)
    emb_grad = torch.zeros(VOCAB_V, WIDTH, dtype=torch.float64).index_add_(0, flat_idx,
                                                                           x["grad_tokens"].view(-1, WIDTH))
    return {"tokens": x["embedding"][x["idx"]], "loss": loss.item(), "head_grad": head.grad,
            "grad_hidden": hidden.grad, "embedding_grad": emb_grad}


def _rows_problems(o: Outcome) -> list[str]:
    """The run's error, or the shards' ids when they are not the documented ones."""
    if o.error is not None:
        return [o.error]
    got = [tuple(rep["rows"]) for rep in o.ranks]
    want = [expected_rows(VOCAB_V, o.p, r) for r in range(o.p)]
    if got != want:
        return [f"vocab_shard({VOCAB_V}) on {o.p} ranks gave ids {got}; expected {want} (V // p each, one more on "
                f"the first V mod p ranks, in rank order)"]
    return []


def layer_problems(o: Outcome) -> list[str]:
    problems = _rows_problems(o)
    if problems:
        return problems
    want, last = _layer_reference(o), o.p - 1
    problems += _close("rank 0: embed_forward's output", o.ranks[0]["tokens"], want["tokens"])
    problems += _close(f"rank {last}: the gradient of h", o.ranks[last]["grad_hidden"], want["grad_hidden"])
    for r, rep in enumerate(o.ranks):
        rows = slice(*rep["rows"])
        if rep["loss"] is None or not abs(rep["loss"] - want["loss"]) <= TOL * max(1.0, abs(want["loss"])):
            problems.append(f"rank {r}: loss {rep['loss']}; expected the unsharded cross-entropy {want['loss']:.12g} "
                            f"(logits up to about 1e3: exp of them overflows unless the global max is subtracted)")
        problems += _close(f"rank {r}: the LM head rows' gradient", rep["head_grad"], want["head_grad"][rows])
        problems += _close(f"rank {r}: the embedding rows' gradient", rep["embedding_grad"], want["embedding_grad"][rows])
        if r != 0 and rep["tokens"] is not None:
            problems.append(f"rank {r}: embed_forward returned a tensor; only the owner (rank 0) gets one (None elsewhere)")
        kind, text = rep["bad_shard"]
        if kind != "ValueError" or str(rep["bad_size"]) not in text:
            problems.append(f"rank {r}: vocab_shard({rep['bad_size']}) on {o.p} ranks gave {kind or 'no error'} "
                            f"{text[:150]!r}; expected a ValueError naming {rep['bad_size']}")
    return problems


def layer_message_problems(o: Outcome) -> list[str]:
    """The four calls' messages and collective bytes, per rank (collectives only counted at p > 1)."""
    if o.error is not None:
        return [o.error]
    p, problems = o.p, []
    n = layer_inputs_of(o.case, o.p)["idx"].numel()
    part = n * WIDTH * 8
    for r, rep in enumerate(o.ranks):
        sent = int(r != 0) + int(r != p - 1)
        recv = (p - 1) * (int(r == 0) + int(r == p - 1))
        want = {"sent": sent, "bytes_sent": sent * part, "recv": recv, "bytes_recv": recv * part}
        if p > 1:
            want.update(broadcast_bytes=2 * part, all_reduce_bytes=3 * n * 8)
        wrong = [f"{rep['counts'][k]} {k.replace('_', ' ')} (expected {w})" for k, w in want.items() if rep["counts"][k] != w]
        if wrong:
            problems.append(f"rank {r}: {', '.join(wrong)}; each rank sends its (N, C) part to rank 0 once and its "
                            f"part of h's gradient to rank p-1 once, broadcasts h and the embedding's gradient, and "
                            f"all-reduces N maxima then 2N sums (N = {n} tokens)")
    return problems


def _pipeline_reference(o: Outcome):
    """The whole model trained STEPS steps on the whole batch: (losses, the model)."""
    return _pipeline_reference_of(o.case, o.p, secret())


@functools.lru_cache(maxsize=None)
def _pipeline_reference_of(case, p: int, _secret: bytes):
    model, (idx, target) = vocab_pipeline_of(case, p)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(idx).view(-1, VOCAB_V), target.view(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def pipeline_problems(o: Outcome) -> list[str]:
    problems = _rows_problems(o)
    if problems:
        return problems
    from minitorch_dist.pipeline.partition import balance_by_params, split_layers
    from minitorch_dist.pipeline.vocab_pipeline import PositionEmbedding
    p, m, last = o.p, o.case.m, o.p - 1
    losses, model = _pipeline_reference(o)
    layers = [PositionEmbedding(model.pos_emb), *model.blocks, model.ln_f]
    bodies = split_layers(layers, balance_by_params(layers, p))
    n_tokens = vocab_pipeline_of(o.case, p)[1][0].numel()
    for r, rep in enumerate(o.ranks):
        rows = slice(*rep["rows"])
        problems += _close(f"rank {r}: its embedding rows after {STEPS} steps", rep["embedding_rows"],
                           model.tok_emb.weight.detach()[rows])
        problems += _close(f"rank {r}: its LM head rows after {STEPS} steps", rep["head_rows"],
                           model.lm_head.weight.detach()[rows])
        for name, value in bodies[r].named_parameters():
            problems += _close(f"rank {r}: body parameter {name} after {STEPS} steps", rep["body"].get(name), value.detach())
        if any(abs(a - b) > TOL * max(1.0, abs(b)) for a, b in zip(rep["losses"], losses)):
            problems.append(f"rank {r}: losses {rep['losses']}; expected the whole batch's {losses}")
        fwd, bwd = int(r < last), int(r > 0)
        sent = STEPS * (m * (fwd + bwd) + bwd + fwd)
        nbytes = STEPS * (m * (fwd * rep["out_bytes"] + bwd * rep["in_bytes"]) + (fwd + bwd) * n_tokens * WIDTH * 8)
        if (rep["counts"]["sent"], rep["counts"]["bytes_sent"]) != (sent, nbytes):
            problems.append(f"rank {r}: sent {rep['counts']['sent']} messages, {rep['counts']['bytes_sent']} bytes in "
                            f"{STEPS} steps; expected {sent} and {nbytes}: per step the body's m per boundary and "
                            f"direction, one part of the embedding to rank 0 and one part of h's gradient to rank "
                            f"p-1 for the whole batch of {MICRO_ROWS * m} samples")
    return problems
