"""Homework 4 test harness, the verdict: taken in the grading process from what the ranks returned.

    judge(outcomes, result_problems, comm_problems)     # fails the test with a clear message

Results: every rank's output equals its view of the dense piece's output, its input's gradient
its view of the dense input gradient, and each parameter's gradient the matching slice of the
dense parameter's gradient (column-parallel: rows, [q | k | v] sliced separately; row-parallel:
columns; vocabulary: rows; biases of row-parallel layers, norms and positions: replicated), within
TOL in float64. Parameters are found by name: a linear layer's `weight` and `bias`; ParallelMLP
`fc`, `fc_proj`; ParallelSelfAttention `qkv`, `proj`; ParallelBlock `ln1`, `attn`, `ln2`, `mlp`.
How: exact counts of each provided collective in the forward and in the backward pass (and the
all-reduced bytes); at TP size 1 (the size-1 bypass) none at all. Memory: parameter elements per
rank = the dense piece's split ones / p + its replicated ones.
"""

from __future__ import annotations

import math

import torch

from assignments.common.rank_runs import judge  # noqa: F401 (the tests import it from here)
from assignments.hw4.tests.hw4_harness import Outcome
from assignments.hw4.tests.hw4_inputs import reference
from assignments.hw4.tests.hw4_setup import (BAD_WIDTH, BATCH, COMM_WIDTH, CONFIGS, IN_VIEW, N_LAYERS, OUT_VIEW, SEQ,
                                             config_for, layout, split_dim, tp_name, view)

TOL = 1e-10
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


# -- parameters: slices (tp_name and layout: hw4_setup.py) -----------------------------------------
def shard(t: torch.Tensor, how: tuple[str, int], rank: int, p: int) -> torch.Tensor:
    if how[0] == "rep":
        return t
    return split_dim(t, 0 if how[0] == "col" else 1, rank, p, parts=how[1])


def _compare(got, want: torch.Tensor, what: str) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"{what}: expected a tensor of shape {tuple(want.shape)}, got {type(got).__name__}"
    if got.shape != want.shape:
        return f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    diff = (got.detach().to(torch.float64) - want).abs().flatten().nan_to_num(float("inf"))
    worst = int(diff.argmax()) if diff.numel() else 0
    if diff.numel() and not bool(diff[worst] <= TOL):
        index, rest = [], worst          # by hand: torch.unravel_index imports sympy (about 1 s a process)
        for size in reversed(want.shape):
            index.insert(0, rest % size)
            rest //= size
        return (f"{what} differs from the dense model's: at {list(index)} got {got.flatten()[worst].item():.6g}, "
                f"expected {want.flatten()[worst].item():.6g} (|diff| {diff[worst].item():.3g} > {TOL:g}); "
                f"{int((diff > TOL).sum())} of {diff.numel()} values differ")
    return None


# -- results ----------------------------------------------------------------------------------
def result_problems(o: Outcome) -> list[str]:
    """Outputs, input gradients and parameter gradients equal the dense piece's (views, slices)."""
    if o.error is not None:
        return [o.error]
    kind, p = o.case.kind, o.p
    out, x_grad, grads = reference(o.case, p)
    expected = {tp_name(kind, d): d for d in grads}
    problems = []
    for r, rep in enumerate(o.ranks):
        problems.append(_compare(rep["out"], view(out, OUT_VIEW.get(kind, "full"), r, p), f"rank {r}: the output"))
        if x_grad is not None:
            problems.append(_compare(rep["x_grad"], view(x_grad, IN_VIEW.get(kind, "full"), r, p),
                                     f"rank {r}: the input's gradient"))
        missing, extra = sorted(set(expected) - set(rep["shapes"])), sorted(set(rep["shapes"]) - set(expected))
        if missing or extra:
            problems.append(f"rank {r}: parameters {sorted(rep['shapes'])}; expected {sorted(expected)} "
                            f"(missing {missing}, unexpected {extra}; names as in the docstrings)")
            continue
        for name, dense in expected.items():
            how = layout(kind, name)
            if kind == "sp" and how[0] == "rep":
                continue                          # partial under sequence parallelism: norms checked below
            problems.append(_compare(rep["grads"][name], shard(grads[dense], how, r, p),
                                     f"rank {r}: {name}.grad ({_layout_text(how)} of the dense {dense}.grad)"))
        for name, g in rep.get("ln_grads", {}).items():
            problems.append(_compare(g, grads[expected[name]],
                                     f"rank {r}: {name}.grad after sync_layer_norm_grads()"))
    return [m for m in problems if m]


def _layout_text(how: tuple[str, int]) -> str:
    return {"col": "this rank's rows" + (" of q, k and v" if how[1] == 3 else ""),
            "row": "this rank's columns", "rep": "all"}[how[0]]


# -- how: communication per pass ---------------------------------------------------------------
WHY = {"copy": "forward: identity | backward: all-reduce", "reduce": "forward: all-reduce | backward: identity",
       "scatter": "forward: keep my slice | backward: all-gather", "gather": "forward: all-gather | backward: split",
       "column": "f before the layer: an all-reduce backward only",
       "column_qkv": "f before the layer: an all-reduce backward only",
       "column_gather": "f: an all-reduce backward; the output gather: an all-gather forward",
       "row": "g after the layer: one all-reduce forward, nothing backward",
       "row_split": "the input split: an all-gather backward; g: one all-reduce forward",
       "mlp": "one all-reduce forward (g) and one backward (f) per MLP",
       "attn": "one all-reduce forward (g) and one backward (f) per attention",
       "block": "attention and MLP: two all-reduces forward, two backward",
       "embedding": "one all-reduce forward of the (B, T, C) embeddings; none backward",
       "xent": "three all-reduces of shape (B, T): max, sum of exp, target logit; none backward",
       "model": "forward: 1 embedding + 2 per block + 3 cross-entropy; backward: 2 per block + 1 (f of the LM head)",
       "sp": "per region an all-gather (into it) and a reduce-scatter (out of it); no all-reduce"}
WHY["xent_large"] = WHY["xent"]


def expected_comm(kind: str, cfg: str, p: int) -> tuple[dict, dict]:
    """(forward, backward): calls of each provided collective and all-reduced bytes."""
    zero = {**dict.fromkeys(OPS, 0), "ar_bytes": 0, "p2p": 0, "barrier": 0}
    if p == 1:
        return dict(zero), dict(zero)
    unit, tok, comm = BATCH * SEQ * CONFIGS[cfg]["d_model"] * 8, BATCH * SEQ * 8, BATCH * SEQ * COMM_WIDTH * 8
    n = 2 * N_LAYERS
    table = {"copy": ({}, {"all_reduce": (1, comm)}), "reduce": ({"all_reduce": (1, comm)}, {}),
             "scatter": ({}, {"all_gather": 1}), "gather": ({"all_gather": 1}, {}),
             "column": ({}, {"all_reduce": (1, unit)}), "column_qkv": ({}, {"all_reduce": (1, unit)}),
             "column_gather": ({"all_gather": 1}, {"all_reduce": (1, unit)}),
             "row": ({"all_reduce": (1, unit)}, {}), "row_split": ({"all_reduce": (1, unit)}, {"all_gather": 1}),
             "mlp": ({"all_reduce": (1, unit)}, {"all_reduce": (1, unit)}),
             "attn": ({"all_reduce": (1, unit)}, {"all_reduce": (1, unit)}),
             "block": ({"all_reduce": (2, 2 * unit)}, {"all_reduce": (2, 2 * unit)}),
             "embedding": ({"all_reduce": (1, unit)}, {}),
             "xent": ({"all_reduce": (3, 3 * tok)}, {}), "xent_large": ({"all_reduce": (3, 3 * tok)}, {}),
             "model": ({"all_reduce": (n + 4, (n + 1) * unit + 3 * tok)}, {"all_reduce": (n + 1, (n + 1) * unit)}),
             "sp": ({"all_gather": 2, "reduce_scatter": 2}, {"all_gather": 2, "reduce_scatter": 2})}
    passes = []
    for spec in table[kind]:
        want = dict(zero)
        for op, v in spec.items():
            calls, nbytes = v if isinstance(v, tuple) else (v, None)
            want[op] = calls
            if op == "all_reduce":
                want["ar_bytes"] = nbytes
        passes.append(want)
    return passes[0], passes[1]


def comm_problems(o: Outcome) -> list[str]:
    """Exactly the expected provided collectives in each pass, nothing point to point."""
    if o.error is not None:
        return [o.error]
    kind, problems = o.case.kind, []
    why = "TP size 1: the size-1 bypass, no communication at all" if o.p == 1 else WHY[kind]
    for r, rep in enumerate(o.ranks):
        for name, got, want in zip(("forward", "backward"), (rep["fwd"], rep["bwd"]), expected_comm(kind, config_for(o.p), o.p)):
            wrong = [f"{got[k]} {k}" + ("" if k.endswith("bytes") else " calls") + f" (expected {want[k]})"
                     for k in want if got.get(k) != want[k]]
            if wrong:
                problems.append(f"rank {r}, {name} pass: {', '.join(wrong)}; expected: {why}")
    return problems


def memory_problems(o: Outcome) -> list[str]:
    """Parameter elements on every rank: the dense piece's split parameters / p + its replicated ones."""
    if o.error is not None:
        return [o.error]
    kind, p = o.case.kind, o.p
    _, _, grads = reference(o.case, p)
    split = sum(g.numel() for d, g in grads.items() if layout(kind, tp_name(kind, d))[0] != "rep")
    replicated = sum(g.numel() for d, g in grads.items() if layout(kind, tp_name(kind, d))[0] == "rep")
    want = split // p + replicated
    problems = []
    for r, rep in enumerate(o.ranks):
        got = sum(math.prod(s) for s in rep["shapes"].values())
        if got != want:
            problems.append(f"rank {r} holds {got} parameter elements; expected {want} = {split} split / {p} + "
                            f"{replicated} replicated (biases of row-parallel layers, norms, positions)")
    return problems


# -- bad input ---------------------------------------------------------------------------------
def bad_input_problems(o: Outcome) -> list[str]:
    """Every rank's constructor raised ValueError whose message names the quantity and its size."""
    if o.error is not None:
        return [o.error]
    kind = o.case.kind
    size = (4 if o.p == 3 else 6) if kind == "bad_heads" else BAD_WIDTH
    words = {"bad_heads": ("head",), "bad_vocab": ("vocab",), "bad_hidden": ("hidden", "feature"),
             "bad_column": ("feature", "output"), "bad_row": ("feature", "input")}[kind]
    problems = []
    for r, rep in enumerate(o.ranks):
        if rep["raised"] is None:
            problems.append(f"rank {r}: the constructor returned; {size} does not divide by the TP size {o.p}: "
                            f"raise ValueError at construction")
        elif rep["raised"] != "ValueError":
            problems.append(f"rank {r}: raised {rep['raised']}: {rep['message'][:200]}; expected ValueError")
        elif str(size) not in rep["message"] or not any(w in rep["message"].lower() for w in words):
            problems.append(f"rank {r}: ValueError({rep['message'][:200]!r}) must name the quantity "
                            f"({' or '.join(words)}...) and its size {size}")
    return problems
