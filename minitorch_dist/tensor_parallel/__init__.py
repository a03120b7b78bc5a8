"""Homework 4: Megatron-style tensor parallelism, layer by layer.

    copy_to_region, reduce_from_region,
    scatter_last_dim, gather_last_dim        4.1  the conjugate communication ops (autograd)
    ColumnParallelLinear, RowParallelLinear  4.2  split linear layers
    ParallelMLP, ParallelSelfAttention,
    ParallelBlock                            4.3  a tensor-parallel transformer block
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy             4.4  the vocabulary split over ranks
    SequenceParallelBlock                    4.5  (bonus) sequence parallelism for the norms
    ParallelCharTransformer                       provided: the whole model from the pieces
"""

from .blocks import ParallelBlock, ParallelMLP, ParallelSelfAttention
from .comm import copy_to_region, gather_last_dim, reduce_from_region, scatter_last_dim
from .common import causal_attention, check_divisible, shard_slice
from .linear import ColumnParallelLinear, RowParallelLinear
from .model import ParallelCharTransformer
from .sequence_parallel import SequenceParallelBlock, gather_sequence, reduce_scatter_sequence
from .vocab import VocabParallelEmbedding, vocab_parallel_cross_entropy

__all__ = ["copy_to_region", "reduce_from_region", "scatter_last_dim", "gather_last_dim", "ColumnParallelLinear",
           "RowParallelLinear", "ParallelMLP", "ParallelSelfAttention", "ParallelBlock", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy", "SequenceParallelBlock", "gather_sequence", "reduce_scatter_sequence",
           "ParallelCharTransformer", "causal_attention", "check_divisible", "shard_slice"]
