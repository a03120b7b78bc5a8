"""Provided: a tensor-parallel CharTransformer assembled from the homework-4 pieces.

    embeddings   VocabParallelEmbedding (tokens) + replicated positions
    blocks       ParallelBlock each
    ln_f         replicated
    LM head      tied to the token embedding: this rank's logits are its vocabulary slice,
                 x W_emb,r^T (after f: copy_to_region), fed to vocab_parallel_cross_entropy.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.models.char_transformer import CharTransformer
from minitorch_dist.tensor_parallel.blocks import ParallelBlock
from minitorch_dist.tensor_parallel.comm import copy_to_region
from minitorch_dist.tensor_parallel.vocab import VocabParallelEmbedding, vocab_parallel_cross_entropy

__all__ = ["ParallelCharTransformer"]


class ParallelCharTransformer(nn.Module):
    """The tensor-parallel twin of a dense CharTransformer with tied weights (same numbers).

    Shapes: idx (B, T) -> logits (B, T, V/p) (this rank's vocabulary slice); loss(idx, targets)
    -> the mean cross-entropy, equal to the dense model's.
    """

    def __init__(self, dense: CharTransformer, group):
        super().__init__()
        if not dense.tie_weights:
            raise ValueError("ParallelCharTransformer: build the dense CharTransformer with tie_weights=True")
        self.group, self.max_len = group, dense.max_len
        self.tok_emb = VocabParallelEmbedding(dense.tok_emb, group)
        self.pos_emb = copy.deepcopy(dense.pos_emb)
        self.blocks = nn.ModuleList([ParallelBlock(b, group) for b in dense.blocks])
        self.ln_f = copy.deepcopy(dense.ln_f)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return F.linear(copy_to_region(self.ln_f(x), self.group), self.tok_emb.weight)

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return vocab_parallel_cross_entropy(self(idx), targets, self.tok_emb.vocab_start, self.group).mean()
