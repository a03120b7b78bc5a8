"""Homework 4, task 4.4: vocabulary-parallel embedding and cross-entropy.

Rank r owns the vocabulary rows [r V/p, (r+1) V/p) of the embedding (and, with tied weights, of
the LM head, so its logits are the slice of the vocabulary it owns).

    VocabParallelEmbedding  look up the ids this rank owns, zero the rows of the others, then
                            all-reduce (g): every rank gets the full embeddings.
    vocab_parallel_cross_entropy
                            the loss of full logits without ever gathering them: three
                            all-reduces of shape (B, T): max of the logits (for stability), sum
                            of exp, and the target's logit (only its owner contributes).
                            loss = log(sum exp(l - max)) - (l_target - max).
                            Gradient: softmax - one-hot, on the shard that owns the target.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.tensor_parallel.comm import reduce_from_region
from minitorch_dist.tensor_parallel.common import shard_slice

__all__ = ["VocabParallelEmbedding", "vocab_parallel_cross_entropy"]


class VocabParallelEmbedding(nn.Module):
    """Embedding with the vocabulary rows split over the group.

    Shapes: idx (...) int64 in [0, V) -> (..., d), the same on every rank.
    Raises ValueError at construction when V is not divisible by p.
    """

    def __init__(self, dense: nn.Embedding, group):
        super().__init__()
        self.group = group
        rows = shard_slice(dense.num_embeddings, group, "the vocabulary size")
        self.vocab_start, self.vocab_end = rows.start, rows.stop
        self.weight = nn.Parameter(dense.weight.detach()[rows].clone())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        # BEGIN SOLUTION  (HW4 task 4.4)
        outside = (idx < self.vocab_start) | (idx >= self.vocab_end)
        local = (idx - self.vocab_start).masked_fill(outside, 0)
        out = F.embedding(local, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        return reduce_from_region(out, self.group)
        # END SOLUTION


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, vocab_start, group):
        # BEGIN SOLUTION  (HW4 task 4.4)
        vocab_local = logits.shape[-1]
        logits_max = logits.detach().max(dim=-1).values.contiguous()           # (B, T)
        group.all_reduce(logits_max, "max")
        shifted = logits - logits_max.unsqueeze(-1)                             # (B, T, V/p)
        outside = (targets < vocab_start) | (targets >= vocab_start + vocab_local)
        local = (targets - vocab_start).masked_fill(outside, 0)
        target_logit = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        group.all_reduce(target_logit)                                          # (B, T)
        exp = shifted.exp()
        sum_exp = exp.sum(dim=-1)
        group.all_reduce(sum_exp)                                               # (B, T)
        ctx.save_for_backward(exp.div_(sum_exp.unsqueeze(-1)), local, outside)
        return sum_exp.log() - target_logit
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_loss):
        # BEGIN SOLUTION  (HW4 task 4.4)
        softmax, local, outside = ctx.saved_tensors
        grad = softmax.clone()
        onehot = F.one_hot(local, grad.shape[-1]).to(grad.dtype) * (~outside).unsqueeze(-1).to(grad.dtype)
        grad -= onehot
        return grad * grad_loss.unsqueeze(-1), None, None, None
        # END SOLUTION


def vocab_parallel_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, vocab_start: int,
                                 group) -> torch.Tensor:
    """Per-token cross-entropy of logits split along the vocabulary.

    Shapes: logits (B, T, V/p): this rank's vocabulary slice starting at id `vocab_start`;
    targets (B, T) int64 in [0, V) -> losses (B, T), the same on every rank (take .mean()).
    Exactly three all-reduces of shape (B, T) in the forward pass, none in the backward.
    """
    if group.size == 1:
        return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), reduction="none").view(targets.shape)
    return _VocabParallelCrossEntropy.apply(logits, targets, vocab_start, group)
