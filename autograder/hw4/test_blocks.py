"""Hidden tests, task 4.3: ParallelMLP, ParallelSelfAttention (heads split) and ParallelBlock,
TP sizes 1-4 (config A: 4 heads, so TP 4 keeps one head per rank; TP 3: config B, 6 heads).

Results: every rank's output and input gradient equal the dense module's, and every shard's
gradient the matching slice of the dense gradient (qkv: this rank's rows of q, of k and of v;
proj and fc_proj: columns; fc: rows; biases of the row layers and the norms: all of it).
How: exactly one all-reduce forward and one backward per MLP and per attention (two each per
block), of the (B, T, C) activations; none at TP size 1. Memory: parameter elements per rank =
the dense layer's split weights / p + the replicated biases and norms.
"""

import pytest

from assignments.hw4.tests.hw4_checks import comm_problems, judge, memory_problems, result_problems
from autograder.hw4.cases import BLOCKS, WORLD_SIZES


@pytest.mark.task4_3
@pytest.mark.points(16)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_mlp_attention_and_block_match_dense(p):
    judge(BLOCKS.outcomes(p, ("mlp", "attn", "block")), result_problems)


@pytest.mark.task4_3
@pytest.mark.points(10)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_one_all_reduce_per_mlp_and_attention_each_pass_and_memory(p):
    judge(BLOCKS.outcomes(p, ("mlp", "attn", "block")), comm_problems, memory_problems)
