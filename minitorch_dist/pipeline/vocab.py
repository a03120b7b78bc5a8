"""Homework 5, task 5.8 (bonus): the vocabulary layers sharded over every pipeline rank.

A language model's input embedding (V x C) and output projection (V x C, no bias) would sit on the
first and the last stage; here every rank of the pipeline holds a share of both: rank r holds the
token ids vocab_shard(V, group), its rows of each weight. The first V mod p ranks hold one row more
than the others (V = 23 on 4 ranks: 6, 6, 6, 5 rows, ids 0-5, 6-11, 12-17, 18-22).

    rows = vocab_shard(V, group)                                     # this rank's ids, a slice
    x = embed_forward(emb_rows, rows.start, idx, group, owner=0)     # (B, T, C) on the owner, else None
    embed_backward(emb_rows, rows.start, idx, grad_x, group, owner=0)          # emb_rows.grad += ...
    loss, grad_h = head_forward_backward(head_rows, rows.start, h, target, group, owner=p - 1)

Every rank calls every function, in the same order. With N = B T tokens of width C:
    embed_forward          each rank looks up the ids it holds (zeros for the others) and sends its
                           (B, T, C) part to the owner (tag EMBED_TAG); the owner adds the p - 1 parts
                           it receives to its own: sum_onto_owner.
    embed_backward         one broadcast of the owner's gradient (B, T, C); each rank adds the rows
                           of its ids into its weight's .grad.
    head_forward_backward  one broadcast of h (N, C) from the owner (the last stage); each rank's
                           logits (N, V_r) = h W_r^T; all_reduce(max) of the N row maxima M, then
                           all_reduce(sum) of the N sums of exp(logit - M) and of the N target logits
                           (only the rank holding the target contributes); loss = mean over tokens of
                           log sum_v exp(l_v - M) + M - l_target, the same on every rank (exp never
                           overflows: every exponent is <= 0). Gradients, written directly:
                           d loss / d logits = (softmax - onehot(target)) / N; W_r.grad += that^T h;
                           each rank's part of h's gradient (N, C) is summed onto the owner (tag
                           HIDDEN_GRAD_TAG).
The gradients of both weights accumulate into .grad (created when None), as backward() would.
Allocate what you create on the weight's device (device=weight.device, torch.zeros_like(weight)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from minitorch_dist.pipeline.stage import MAX_MICROBATCHES

__all__ = ["vocab_shard", "sum_onto_owner", "embed_forward", "embed_backward", "head_forward_backward",
           "EMBED_TAG", "HIDDEN_GRAD_TAG"]

# Tags of the parts sent to an owner. Tags run 0 .. 2 MAX_MICROBATCHES - 1; these two are the last of
# the activation and the gradient ranges, and never meet a pipeline message of the same tag: rank 0
# receives no activation, rank p-1 no gradient.
EMBED_TAG = MAX_MICROBATCHES - 1            # the parts of the embedding's output, sent to rank 0
HIDDEN_GRAD_TAG = 2 * MAX_MICROBATCHES - 1  # the parts of the hidden state's gradient, sent to rank p-1


def _owned(ids: Tensor, start: int, n_rows: int) -> tuple[Tensor, Tensor]:
    """(ids - start with the ids this rank does not hold set to 0, mask of the ids it holds)."""
    local = ids - start
    mine = (local >= 0) & (local < n_rows)
    return local.masked_fill(~mine, 0), mine


def _add_grad(weight: Tensor, grad: Tensor) -> None:
    """weight.grad += grad, creating it when None (as backward() accumulates)."""
    if weight.grad is None:
        weight.grad = grad.clone()
    else:
        weight.grad.add_(grad)


def vocab_shard(vocab_size: int, group) -> slice:
    """The token ids [start, stop) whose rows rank group.rank holds: V // p ids each, one more on the
    first V mod p ranks, in rank order. Raises ValueError when some rank would hold no row (V < p)."""
    # BEGIN YOUR CODE  (HW5 task 5.8)
    raise NotImplementedError("HW5 task 5.8: vocab_shard is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def sum_onto_owner(part: Tensor, group, owner: int, tag: int) -> Tensor | None:
    """The sum over the ranks of `part` (same shape everywhere) on rank `owner`, None elsewhere:
    each other rank sends its part to the owner (one message), the owner adds the p - 1 it receives."""
    # BEGIN YOUR CODE  (HW5 task 5.8)
    raise NotImplementedError("HW5 task 5.8: sum_onto_owner is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def embed_forward(weight: Tensor, start: int, idx: Tensor, group, owner: int = 0) -> Tensor | None:
    """The token embeddings of idx on rank `owner` (None elsewhere), from the rows every rank holds.

    Shapes: weight (V_r, C), this rank's rows (ids start .. start + V_r - 1); idx (B, T) int64 in
    [0, V), the same on every rank -> (B, T, C) on the owner. Values only (no autograd graph).
    """
    # BEGIN YOUR CODE  (HW5 task 5.8)
    raise NotImplementedError("HW5 task 5.8: embed_forward is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def embed_backward(weight: Tensor, start: int, idx: Tensor, grad: Tensor | None, group, owner: int = 0) -> None:
    """Accumulate into weight.grad the gradient of this rank's rows, given the gradient of
    embed_forward's output on rank `owner` (grad (B, T, C) there, None elsewhere)."""
    # BEGIN YOUR CODE  (HW5 task 5.8)
    raise NotImplementedError("HW5 task 5.8: embed_backward is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE


def head_forward_backward(weight: Tensor, start: int, h: Tensor | None, target: Tensor, group,
                          owner: int) -> tuple[Tensor, Tensor | None]:
    """The mean cross-entropy of the logits h W^T over the whole vocabulary, and its gradients.

    Shapes: weight (V_r, C), this rank's rows of the output projection (ids start ..); h (..., C)
    on rank `owner` (None elsewhere); target (...) int64 in [0, V), the same on every rank.
    Returns (the loss, a 0-dim tensor equal on every rank; the gradient of h on the owner, shaped
    like h, else None). Accumulates this rank's rows' gradient into weight.grad.
    """
    # BEGIN YOUR CODE  (HW5 task 5.8)
    raise NotImplementedError("HW5 task 5.8: head_forward_backward is not implemented yet (see assignments/hw5/README.md)")
    # END YOUR CODE
