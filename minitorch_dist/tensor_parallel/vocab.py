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
        # BEGIN YOUR CODE  (HW4 task 4.4)
        raise NotImplementedError("HW4 task 4.4: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, vocab_start, group):
        # BEGIN YOUR CODE  (HW4 task 4.4)
        raise NotImplementedError("HW4 task 4.4: forward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE

    @staticmethod
    def backward(ctx, grad_loss):
        # BEGIN YOUR CODE  (HW4 task 4.4)
        raise NotImplementedError("HW4 task 4.4: backward is not implemented yet (see assignments/hw4/README.md)")
        # END YOUR CODE


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
