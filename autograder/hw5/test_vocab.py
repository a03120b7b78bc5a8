"""Hidden tests of bonus 5.8: the vocabulary layers sharded over every pipeline rank.

At p = 1, 2, 3, 4 with a vocabulary of 23 tokens (uneven shards at p > 1), one launch per p:
  - the layers alone: the shards are the documented ones; the embedding's output, the loss, the
    hidden state's gradient and every rank's rows of both weights' gradients equal the unsharded
    layers' in float64, with logits near 1e3 (exp overflows without the global max, and a rank's
    own max gives another loss); each rank sends exactly its two parts, the collectives carry 2 N C
    and 3 N values; a vocabulary smaller than p is refused with a ValueError naming its size;
  - the pipeline step (m = p+1 micro-batches at p > 1, never a multiple of p): after two steps
    every rank's shares equal the whole model trained on the whole batch, and each rank sent the
    body's messages and its two parts per step, nothing more.
"""

import pytest

from assignments.hw5.tests.hw5_checks import judge
from assignments.hw5.tests.hw5_vocab_checks import layer_message_problems, layer_problems, pipeline_problems
from autograder.hw5.cases import VOCAB


@pytest.mark.task5_8
@pytest.mark.points(12)
@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_vocab_layers_and_pipeline_match_unsharded_with_large_logits(p):
    judge(VOCAB.outcomes(p, "vocab_layers"), layer_problems, layer_message_problems)
    judge(VOCAB.outcomes(p, "vocab_pipeline"), pipeline_problems)
