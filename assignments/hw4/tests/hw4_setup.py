"""Homework 4 test harness: what a case runs, its inputs, and the dense reference it must match.
Used on the ranks (hw4_ranks.py) and in the grading process (hw4_checks.py). The graded cases draw
the dense model's weights, the inputs and the loss weights from the grading's secret in the grading
process (hw4_inputs.py): each rank is sent its view of the input and of the loss weight, and the
piece's parameters with only its own shard filled in (zeros elsewhere; replicated ones whole), so
that no rank can compute the dense piece alone. The public seeds below serve the bad-input cases.

Dense models (float64; every weight, bias and norm drawn at random so that a bias added twice
or a wrong slice shows): CharTransformer(vocab 48, n_layers 2, max_len 16) with
    config "A": d_model 32, 4 heads      for TP sizes 1, 2, 4
    config "B": d_model 48, 6 heads      for TP sizes 3, 6 (heads, hidden 4 d and vocab divide)
Inputs: activations (B, T, C) = (2, 12, C); token ids (2, 12) in [0, 48). A piece's scalar loss
is sum(output * weight) with a fixed random weight (the whole model: its mean cross-entropy).

How a rank sees a dense tensor (view): "full" (the same on every rank), "last" (rank r's slice of
the last dim), "last3" (the last dim is [q | k | v]: r's slice of each), "seq" (r's slice of T). How a rank holds a
parameter (layout): "col" (its rows, of each of `parts` blocks), "row" (its columns), "rep" (all).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from minitorch_dist.models import CharTransformer

CONFIGS = {"A": {"vocab": 48, "d_model": 32, "n_heads": 4}, "B": {"vocab": 48, "d_model": 48, "n_heads": 6}}
BATCH, SEQ, N_LAYERS, MAX_LEN = 2, 12, 2, 16
COMM_WIDTH = 12                                 # last dim of the comm-op inputs (divisible by 1, 2, 3, 4, 6)
BAD_WIDTH = 50                                  # a hidden size / vocabulary that 3 and 4 do not divide

COMM_KINDS = ("copy", "reduce", "scatter", "gather")
LINEAR_KINDS = ("column", "column_gather", "column_qkv", "row", "row_split")
BLOCK_KINDS = ("mlp", "attn", "block")
VOCAB_KINDS = ("embedding", "xent", "xent_large", "model")
BAD_KINDS = ("bad_column", "bad_row", "bad_heads", "bad_hidden", "bad_vocab")
TASK_OF = {**dict.fromkeys(COMM_KINDS, "task4_1"), **dict.fromkeys(LINEAR_KINDS, "task4_2"),
           **dict.fromkeys(BLOCK_KINDS, "task4_3"), **dict.fromkeys(VOCAB_KINDS, "task4_4"), "sp": "task4_5",
           "bad_column": "task4_2", "bad_row": "task4_2", "bad_heads": "task4_3", "bad_hidden": "task4_3",
           "bad_vocab": "task4_4"}
WHAT = {"copy": "copy_to_region", "reduce": "reduce_from_region", "scatter": "scatter_last_dim",
        "gather": "gather_last_dim", "column": "ColumnParallelLinear(fc)",
        "column_gather": "ColumnParallelLinear(fc, gather_output=True)",
        "column_qkv": "ColumnParallelLinear(attn.qkv, parts=3)", "row": "RowParallelLinear(fc_proj)",
        "row_split": "RowParallelLinear(fc_proj, input_is_parallel=False)", "mlp": "ParallelMLP",
        "attn": "ParallelSelfAttention", "block": "ParallelBlock", "embedding": "VocabParallelEmbedding",
        "xent": "vocab_parallel_cross_entropy", "xent_large": "vocab_parallel_cross_entropy (logits ~ 800)",
        "model": "ParallelCharTransformer(2 layers).loss", "sp": "SequenceParallelBlock",
        "bad_column": "ColumnParallelLinear(Linear(C, 50))", "bad_row": "RowParallelLinear(Linear(50, C))",
        "bad_heads": "ParallelBlock(heads not divisible)", "bad_hidden": "ParallelMLP(hidden 50)",
        "bad_vocab": "ParallelCharTransformer(vocab 50)"}
IN_VIEW = {"gather": "last", "row": "last", "xent": "last", "xent_large": "last", "sp": "seq"}
OUT_VIEW = {"scatter": "last", "column": "last", "column_qkv": "last3", "sp": "seq"}


@dataclass(frozen=True)
class Case:
    """One piece of homework 4 run on every rank: kind (see WHAT), tag (which test looks at it)."""

    kind: str
    tag: str = ""

    @property
    def task(self) -> str:
        return TASK_OF[self.kind]

    def describe(self, p: int) -> str:
        """'ParallelBlock (TP size 3, config B: d_model 48, 6 heads, vocab 48)' for messages."""
        c = config_for(p)
        return (f"{WHAT[self.kind]} (TP size {p}, config {c}: d_model {CONFIGS[c]['d_model']}, "
                f"{CONFIGS[c]['n_heads']} heads, vocab {CONFIGS[c]['vocab']})")


def config_for(p: int) -> str:
    return "B" if p % 3 == 0 else "A"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def build_dense(cfg: str, vocab: int | None = None, n_heads: int | None = None,
                seed: int = 1234) -> CharTransformer:
    """The dense model of `cfg` (a new object each call), every parameter random from `seed`, float64."""
    c = CONFIGS[cfg]
    model = CharTransformer(vocab or c["vocab"], d_model=c["d_model"], n_heads=n_heads or c["n_heads"],
                            n_layers=N_LAYERS, max_len=MAX_LEN, seed=0, tie_weights=True).double()
    gen = _gen(seed)
    with torch.no_grad():
        for name, prm in model.named_parameters():
            noise = torch.randn(prm.shape, generator=gen, dtype=torch.float64)
            if "ln" in name.split(".")[-2]:
                prm.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * noise)
            else:
                prm.copy_((0.5 if "emb" in name else 0.2) * noise)
    return model


def dense_piece(kind: str, model: CharTransformer, target_ids: torch.Tensor | None = None):
    """(the dense module whose weights the piece slices, forward(module, input) -> output); the loss
    of "model" and the cross-entropies take `target_ids` (targets() when None)."""
    target_ids = targets() if target_ids is None else target_ids
    block = model.blocks[0]
    if kind in ("column", "column_gather"):
        return block.fc, lambda m, x: m(x)
    if kind == "column_qkv":
        return block.attn.qkv, lambda m, x: m(x)
    if kind in ("row", "row_split"):
        return block.fc_proj, lambda m, x: m(x)
    if kind == "mlp":
        return block, lambda m, x: m.fc_proj(m.act(m.fc(x)))
    if kind == "attn":
        return block.attn, lambda m, x: m(x)
    if kind in ("block", "sp"):
        return block, lambda m, x: m(x)
    if kind == "embedding":
        return model.tok_emb, lambda m, x: m(x)
    if kind == "model":
        return model, lambda m, x: F.cross_entropy(m(x).flatten(0, 1), target_ids.flatten())
    return None, lambda m, x: F.cross_entropy(x.flatten(0, 1), target_ids.flatten(), reduction="none").view(BATCH, SEQ)


@functools.lru_cache(maxsize=None)
def tokens(seed: int = 5) -> torch.Tensor:
    return torch.randint(0, CONFIGS["A"]["vocab"], (BATCH, SEQ), generator=_gen(seed))


def targets() -> torch.Tensor:
    return tokens(6)


def dense_input(kind: str, cfg: str, seed: int | None = None) -> torch.Tensor:
    """The whole input of a piece (what a rank sees is view(dense_input, IN_VIEW)), from `seed`
    (public seeds when None)."""
    c = CONFIGS[cfg]
    if kind in ("embedding", "model"):
        if seed is not None:
            return torch.randint(0, c["vocab"], (BATCH, SEQ), generator=_gen(seed))
        return tokens()
    if kind.startswith("xent"):
        logits = 2.0 * torch.randn(BATCH, SEQ, c["vocab"], generator=_gen(7 if seed is None else seed),
                                   dtype=torch.float64)
        if kind == "xent_large":                  # exp() overflows unless the max is subtracted first
            logits[..., c["vocab"] // 2:] += 800.0
        return logits
    width = {"column": 1, "column_gather": 1, "column_qkv": 1, "row": 4, "row_split": 4}.get(kind, 1) * c["d_model"]
    if kind in COMM_KINDS:
        width = COMM_WIDTH
    return torch.randn(BATCH, SEQ, width, generator=_gen(8 if seed is None else seed), dtype=torch.float64)


def out_shape(kind: str, cfg: str) -> tuple[int, ...]:
    c = CONFIGS[cfg]
    if kind == "model":
        return ()
    if kind.startswith("xent"):
        return (BATCH, SEQ)
    if kind in COMM_KINDS:
        return (BATCH, SEQ, COMM_WIDTH)
    return (BATCH, SEQ, {"column": 4, "column_gather": 4, "column_qkv": 3}.get(kind, 1) * c["d_model"])


def loss_weight(kind: str, cfg: str, seed: int) -> torch.Tensor | None:
    """The weight w of the piece's loss sum(output * w) from `seed` (None for the model: its loss
    itself). copy_to_region gets a different weight on every rank (its gradient is their sum)."""
    if kind == "model":
        return None
    return torch.randn(out_shape(kind, cfg), generator=_gen(seed), dtype=torch.float64)


def reduce_input(seed: int) -> torch.Tensor:
    """reduce_from_region: one rank's own input from `seed` (their sum is the output)."""
    return torch.randn(BATCH, SEQ, COMM_WIDTH, generator=_gen(seed), dtype=torch.float64)


def view(t: torch.Tensor, how: str, rank: int, p: int) -> torch.Tensor:
    """What rank `rank` of p holds of the dense tensor t (see the module docstring)."""
    if how == "full":
        return t
    if how == "seq":
        n = t.shape[1] // p
        return t[:, rank * n:(rank + 1) * n]
    return split_dim(t, -1, rank, p, parts=3 if how == "last3" else 1)


def split_dim(t: torch.Tensor, dim: int, rank: int, p: int, parts: int = 1) -> torch.Tensor:
    """Rank r's slice of each of `parts` equal blocks of dimension `dim`, concatenated."""
    block = t.shape[dim] // parts
    m = block // p
    return torch.cat([t.narrow(dim, k * block + rank * m, m) for k in range(parts)], dim=dim)


def tp_name(kind: str, dense_name: str) -> str:
    """The tensor-parallel piece's name of a dense parameter ('blocks.0.fc.weight' -> 'blocks.0.mlp.fc.weight')."""
    parts = dense_name.split(".")
    if kind in ("block", "sp", "model") and len(parts) >= 2 and parts[-2] in ("fc", "fc_proj"):
        parts.insert(len(parts) - 2, "mlp")
    return ("tp." if kind == "sp" else "") + ".".join(parts)


def layout(kind: str, name: str) -> tuple[str, int]:
    """How a rank holds a parameter: ("col", parts) rows split, ("row", 1) columns split, ("rep", 1)."""
    leaf = name.split(".")[-1]
    module = name.split(".")[-2] if "." in name else kind
    if kind.startswith("column"):
        return "col", 3 if kind == "column_qkv" else 1
    if kind.startswith("row") or module in ("proj", "fc_proj"):
        return ("row", 1) if leaf == "weight" else ("rep", 1)
    if kind == "embedding" or module in ("fc", "tok_emb"):
        return "col", 1
    if module == "qkv":
        return "col", 3
    return "rep", 1


def shard_only(kind: str, module, rank: int, p: int) -> dict:
    """The state of the dense piece `module` as rank `rank` of p receives it: each split parameter
    zero outside this rank's shard (its layout), replicated ones whole."""
    with torch.no_grad():
        for name, prm in module.named_parameters():
            how = layout(kind, tp_name(kind, name))
            if how[0] == "rep":
                continue
            keep = torch.zeros_like(prm)
            dim = 0 if how[0] == "col" else 1
            block = prm.shape[dim] // how[1]
            m = block // p
            for k in range(how[1]):
                start = k * block + rank * m
                keep.narrow(dim, start, m).copy_(prm.narrow(dim, start, m))
            prm.copy_(keep)
    return {k: v.clone() for k, v in module.state_dict().items()}


def dense_run(kind: str, model: CharTransformer, x: torch.Tensor, w: torch.Tensor | None,
              target_ids: torch.Tensor | None):
    """(output, input gradient, {dense parameter name: gradient}) of the dense piece of `model` on the
    whole input x, with the loss sum(output * w) (the model's own loss when w is None)."""
    module, forward = dense_piece(kind, model, target_ids)
    if x.is_floating_point():
        x = x.clone().requires_grad_()
    out = forward(module, x)
    (out if w is None else (out * w).sum()).backward()
    grads = {} if module is None else {n: prm.grad for n, prm in module.named_parameters() if prm.grad is not None}
    return out.detach(), x.grad, grads
