"""Hidden tests, task 4.4: VocabParallelEmbedding, vocab_parallel_cross_entropy, and the whole
2-layer ParallelCharTransformer (provided; tied LM head) built from them.

Embedding: the dense embeddings on every rank; the gradient of rank r's rows equals the dense
gradient's rows. Cross-entropy (logits split along the vocabulary; also logits near 800, where
exp overflows unless the maximum is subtracted first): per-token losses equal F.cross_entropy's
and the logits' gradient equals the dense one's slice (softmax minus one-hot on the owning shard);
exactly three all-reduces of shape (B, T) forward, none backward. The model: its loss equals the
dense CharTransformer's, every shard's gradient the dense gradient's slice, 8 all-reduces forward
and 5 backward (none at TP size 1), and 1/p of the split parameters per rank.
"""

import pytest

from assignments.hw4.tests.hw4_checks import comm_problems, judge, memory_problems, result_problems
from autograder.hw4.cases import COMM_WORLD_SIZES, MODEL, VOCAB, VOCAB_PIECES, WORLD_SIZES


@pytest.mark.task4_4
@pytest.mark.points(12)
@pytest.mark.parametrize("p", COMM_WORLD_SIZES)
def test_embedding_and_cross_entropy_match_dense_with_three_all_reduces(p):
    judge(VOCAB.outcomes(p, VOCAB_PIECES), result_problems, comm_problems)


@pytest.mark.task4_4
@pytest.mark.points(10)
@pytest.mark.parametrize("p", WORLD_SIZES)
def test_two_layer_model_loss_and_gradients_match_dense(p):
    judge(MODEL.outcomes(p, "model"), result_problems, comm_problems, memory_problems)
