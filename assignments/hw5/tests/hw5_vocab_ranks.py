"""Homework 5 test harness, rank side of bonus 5.8 (the vocabulary layers sharded over every rank).
Each rank reports plain data; the verdict is in hw5_vocab_checks.py. The graded inputs are drawn from
the grading's secret in the grading process (hw5_inputs.py): rank r is sent its own rows of both
vocabulary layers (zeros elsewhere), the last rank h, rank 0 the embedding's gradient; the token ids
and targets, which every rank reads, go to all. The functions below default to public seeds.

Inputs (float64): a vocabulary of VOCAB_V = 23 tokens (not a multiple of 2, 3 or 4, so
the shards are uneven), width WIDTH, N = ROWS x SEQ tokens. The hidden states are scaled by HEAT so
that the logits reach about a thousand: exp of them overflows even in float64, and a softmax whose
maximum is not the global one gives a different loss.
    "vocab_layers"    vocab_shard, embed_forward, embed_backward, head_forward_backward once each
    "vocab_pipeline"  STEPS steps of vocab_pipeline_step on a CharTransformer (final norm scaled by
                      HEAT), its body cut into p stages, m micro-batches
"""

from __future__ import annotations

import torch

from assignments.hw5.tests.hw5_setup import LR, MOMENTUM, SEQ, STEPS, Case, randomized

VOCAB_V, WIDTH, ROWS, HEAT = 23, 16, 2, 300.0
MICRO_ROWS = 2                        # samples per micro-batch of the pipeline cases

__all__ = ["RUNNERS", "VOCAB_V", "WIDTH", "ROWS", "HEAT", "MICRO_ROWS", "layer_inputs", "vocab_model",
           "pipeline_batch", "layer_counts"]


def layer_inputs(seed: int = 5858) -> dict:
    """The inputs of the "vocab_layers" case from `seed`: full weights, token ids, targets, h, the
    embedding's gradient."""
    gen = torch.Generator().manual_seed(seed)
    d = torch.float64
    return {"embedding": torch.randn(VOCAB_V, WIDTH, generator=gen, dtype=d),
            "head": 0.3 * torch.randn(VOCAB_V, WIDTH, generator=gen, dtype=d),
            "idx": torch.randint(0, VOCAB_V, (ROWS, SEQ), generator=gen),
            "target": torch.randint(0, VOCAB_V, (ROWS, SEQ), generator=gen),
            "hidden": HEAT * torch.randn(ROWS, SEQ, WIDTH, generator=gen, dtype=d),
            "grad_tokens": torch.randn(ROWS, SEQ, WIDTH, generator=gen, dtype=d)}


def vocab_model(seed: int = 58):
    """An untied float64 CharTransformer of VOCAB_V tokens, every parameter random from `seed`, final
    norm times HEAT."""
    from minitorch_dist.models import CharTransformer
    model = CharTransformer(VOCAB_V, d_model=WIDTH, n_heads=2, n_layers=2, max_len=SEQ, seed=0,
                            tie_weights=False).double()
    randomized(model, seed=seed)
    with torch.no_grad():
        model.ln_f.weight.mul_(HEAT)
    return model


def pipeline_batch(m: int, seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(token ids, targets) of the "vocab_pipeline" case's batch, from `seed` (public: 580 + m)."""
    gen = torch.Generator().manual_seed(580 + m if seed is None else seed)
    tokens = torch.randint(0, VOCAB_V, (MICRO_ROWS * m, SEQ + 1), generator=gen)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def layer_counts(group) -> dict:
    c = group.counters
    return {"sent": c.messages_sent, "recv": c.messages_recv, "bytes_sent": c.bytes_sent, "bytes_recv": c.bytes_recv,
            "all_reduce_bytes": c.op("all_reduce").tensor_bytes, "broadcast_bytes": c.op("broadcast").tensor_bytes}


def _delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def _error(call) -> tuple[str | None, str]:
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - judged in the grading process
        return type(exc).__name__, str(exc)
    return None, ""


def run_vocab_layers(case: Case, group, own: dict) -> dict:
    """The four functions once, on this rank's inputs (own: layer_inputs' keys, this rank's share);
    what each rank holds afterwards."""
    from minitorch_dist.pipeline import vocab as vp
    x = {k: None if v is None else v.to(group.device) for k, v in own.items()}
    p, r, last = group.size, group.rank, group.size - 1
    group.barrier()
    before = layer_counts(group)
    rows = vp.vocab_shard(VOCAB_V, group)
    emb = torch.nn.Parameter(x["embedding"][rows].clone())
    head = torch.nn.Parameter(x["head"][rows].clone())
    tokens = vp.embed_forward(emb, rows.start, x["idx"], group, owner=0)
    vp.embed_backward(emb, rows.start, x["idx"], x["grad_tokens"] if r == 0 else None, group, owner=0)
    loss, grad_h = vp.head_forward_backward(head, rows.start, x["hidden"] if r == last else None, x["target"],
                                            group, owner=last)
    after = layer_counts(group)
    group.barrier()
    bad = _error(lambda: vp.vocab_shard(p - 1, group))
    return {"rows": (rows.start, rows.stop), "tokens": tokens, "embedding_grad": emb.grad, "head_grad": head.grad,
            "loss": None if loss is None else float(loss), "grad_hidden": grad_h, "counts": _delta(before, after),
            "bad_shard": bad, "bad_size": p - 1}


def run_vocab_pipeline(case: Case, group, own: dict) -> dict:
    """STEPS steps of vocab_pipeline_step with m = case.m, from this rank's model (own["state"]: its
    vocabulary rows only) on the batch (own["idx"], own["target"]); each rank's shares afterwards."""
    from minitorch_dist import pipeline as pp
    idx, target = own["idx"].to(group.device), own["target"].to(group.device)
    model = vocab_model()
    model.load_state_dict(own["state"])
    parts = pp.vocab_pipeline_parts(model.to(group.device), group, idx[:MICRO_ROWS])
    opt = torch.optim.SGD(parts.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    group.barrier()
    before = layer_counts(group)
    for _ in range(STEPS):
        losses.append(float(pp.vocab_pipeline_step(parts, idx, target, opt, case.m)))
    after = layer_counts(group)
    group.barrier()
    return {"rows": (parts.rows.start, parts.rows.stop), "losses": losses, "counts": _delta(before, after),
            "embedding_rows": parts.embedding_rows.detach().clone(), "head_rows": parts.head_rows.detach().clone(),
            "body": {n: prm.detach().clone() for n, prm in parts.body.named_parameters()},
            "in_bytes": torch.empty(parts.spec.in_shape, dtype=parts.spec.in_dtype, device="meta").nbytes,
            "out_bytes": torch.empty(parts.spec.out_shape, dtype=parts.spec.out_dtype, device="meta").nbytes}


RUNNERS = {"vocab_layers": run_vocab_layers, "vocab_pipeline": run_vocab_pipeline}
