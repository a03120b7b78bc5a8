"""Homework 4 test harness, rank side: build a piece from the dense model, run it forward and
backward, and report what came out and what was communicated in each pass. The verdict is taken
in the grading process (hw4_checks.py). What a rank holds (its shard of the piece's weights, its view
of the input and of the loss weight, the targets) is made in the grading process (hw4_inputs.py) and
comes to it as its own argument.
"""

from __future__ import annotations

from assignments.common.rank_runs import attempt, run_case_list
from assignments.hw4.tests.hw4_setup import (BAD_WIDTH, COMM_KINDS, Case, build_dense, config_for, dense_input,
                                             dense_piece, targets)

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def counts(group) -> dict:
    """Calls of each provided collective, all-reduced bytes, point-to-point messages sent."""
    c = group.counters
    return {**{op: c.op(op).calls for op in OPS}, "ar_bytes": c.op("all_reduce").tensor_bytes,
            "p2p": c.messages_sent, "barrier": c.op("barrier").calls}


def _delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def with_shard(kind: str, model, state):
    """The dense model with its piece's parameters set to `state` (this rank's shard: hw4_inputs.py)."""
    if state is not None:
        dense_piece(kind, model)[0].load_state_dict(state)
    return model


def build_tp(kind: str, model, group, target_ids):
    """(the tensor-parallel piece, forward(piece, x) -> output) built from the dense model; the
    cross-entropies and the model's loss take `target_ids`."""
    from minitorch_dist import tensor_parallel as tp
    if kind in COMM_KINDS:
        op = {"copy": tp.copy_to_region, "reduce": tp.reduce_from_region, "scatter": tp.scatter_last_dim,
              "gather": tp.gather_last_dim}[kind]
        return None, lambda m, x: op(x, group)
    if kind.startswith("xent"):
        start = group.rank * (model.vocab_size // group.size)
        return None, lambda m, x: tp.vocab_parallel_cross_entropy(x, target_ids.to(group.device), start, group)
    dense, _ = dense_piece(kind, model)
    if kind.startswith("column"):
        piece = tp.ColumnParallelLinear(dense, group, gather_output=kind == "column_gather",
                                        parts=3 if kind == "column_qkv" else 1)
    elif kind.startswith("row"):
        piece = tp.RowParallelLinear(dense, group, input_is_parallel=kind == "row")
    elif kind == "mlp":
        piece = tp.ParallelMLP(dense.fc, dense.fc_proj, group)
    elif kind == "attn":
        piece = tp.ParallelSelfAttention(dense, group)
    elif kind == "block":
        piece = tp.ParallelBlock(dense, group)
    elif kind == "sp":
        piece = tp.SequenceParallelBlock(dense, group)
    elif kind == "embedding":
        piece = tp.VocabParallelEmbedding(dense, group)
    else:
        piece = tp.ParallelCharTransformer(model, group)
        return piece, lambda m, x: m.loss(x, target_ids.to(group.device))
    return piece, lambda m, x: m(x)


def run_piece(case: Case, group, own: dict) -> dict:
    """Forward and backward of one piece on this rank (own: its shard, input view, loss weight view,
    targets); outputs, gradients, counts per pass."""
    kind, cfg = case.kind, config_for(group.size)
    model = with_shard(kind, build_dense(cfg), own["state"])
    piece, forward = build_tp(kind, model.to(group.device), group, own["targets"])
    x = own["x"].to(group.device)               # made on the CPU (the same numbers on any device), then moved
    if x.is_floating_point():
        x = x.clone().requires_grad_()
    before = counts(group)
    out = forward(piece, x)
    middle = counts(group)
    w = own["w"]
    (out if w is None else (out * w.to(group.device)).sum()).backward()
    after = counts(group)
    params = dict(piece.named_parameters()) if piece is not None else {}
    report = {"out": out.detach(), "x_grad": x.grad, "fwd": _delta(middle, before), "bwd": _delta(after, middle),
              "grads": {n: prm.grad for n, prm in params.items()}, "shapes": {n: tuple(prm.shape) for n, prm in params.items()}}
    if kind == "sp":                            # the layer norms' partial gradients, summed over the group
        piece.sync_layer_norm_grads()
        report["ln_grads"] = {n: prm.grad for n, prm in params.items() if ".ln" in n}
    return report


def _valid_and_bad(kind: str, cfg: str, group):
    """(build the valid twin and run it, build the invalid one): the valid one must work first."""
    from torch import nn

    from minitorch_dist import tensor_parallel as tp
    model = build_dense(cfg).to(group.device)
    block, c = model.blocks[0], model.d_model
    x = dense_input("block", cfg).to(group.device)
    if kind == "bad_column":
        return lambda: tp.ColumnParallelLinear(block.fc, group)(x), lambda: tp.ColumnParallelLinear(
            nn.Linear(c, BAD_WIDTH).double(), group)
    if kind == "bad_row":
        row = dense_input("row", cfg).to(group.device)
        return lambda: tp.RowParallelLinear(block.fc_proj, group, input_is_parallel=False)(row), \
            lambda: tp.RowParallelLinear(nn.Linear(BAD_WIDTH, c).double(), group)
    if kind == "bad_hidden":
        return lambda: tp.ParallelMLP(block.fc, block.fc_proj, group)(x), lambda: tp.ParallelMLP(
            nn.Linear(c, BAD_WIDTH).double(), nn.Linear(BAD_WIDTH, c).double(), group)
    if kind == "bad_heads":
        heads = 4 if group.size == 3 else 6      # d_model 48 splits into 4 or 6 heads; TP 3 or 4 does not divide them
        bad = build_dense("B", n_heads=heads).blocks[0]
        return lambda: tp.ParallelBlock(block, group)(x), lambda: tp.ParallelBlock(bad, group)
    bad = build_dense(cfg, vocab=BAD_WIDTH)
    return (lambda: tp.ParallelCharTransformer(model, group).loss(dense_input("model", cfg).to(group.device),
                                                                  targets().to(group.device)),
            lambda: tp.ParallelCharTransformer(bad, group))


def run_bad_input(case: Case, group) -> dict:
    """The valid piece runs; the invalid one must raise ValueError in its constructor (caught here)."""
    valid, bad = _valid_and_bad(case.kind, config_for(group.size), group)
    valid()
    return attempt(bad)


def run_cases_on_rank(group, cases: list[Case], inputs: list) -> list[dict]:
    """Rank code: run every case in order on this rank's own input of each (`inputs`, made in the
    grading process: hw4_inputs.py); a stub's error is recorded per kind, others stop the launch."""
    def run_one(case, g, own):
        return run_bad_input(case, g) if case.kind.startswith("bad_") else run_piece(case, g, own)
    return run_case_list(group, cases, run_one, key=lambda c: c.kind, inputs=inputs)
