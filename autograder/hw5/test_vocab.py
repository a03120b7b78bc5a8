"""Hidden tests of bonus 5.8: the vocabulary layers sharded over every pipeline rank.

At p = 1, 2, 3, 4 with a vocabulary of 23 tokens (uneven shards): the shards are the documented
ones; the embedding's output, the loss, the hidden state's gradient and every rank's rows of both
weights' gradients equal the unsharded layers' in float64, with logits near 1e3 (exp overflows
without the global max); each rank sends exactly its two parts and the collectives carry 2 N C
and 3 N values; a vocabulary smaller than p is refused with a clear error. The pipeline step
(m = 2p+1) trains every share to what the whole model trained on the whole batch holds. The same on
MPI at p = 2 (ranks started by mpiexec).
"""

import pytest

from assignments.hw5.tests.hw5_checks import judge
from assignments.hw5.tests.hw5_vocab_checks import layer_message_problems, layer_problems, pipeline_problems
from autograder.hw5.cases import MPI_WORLD_SIZE, VOCAB, VOCAB_MPI


@pytest.mark.task5_8
@pytest.mark.points(2)
@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_vocab_layers_match_unsharded_with_large_logits_and_their_messages(p):
    judge(VOCAB.outcomes(p, "vocab_layers"), layer_problems, layer_message_problems)


@pytest.mark.task5_8
@pytest.mark.points(1)
@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_vocab_pipeline_step_matches_whole_model(p):
    judge(VOCAB.outcomes(p, "vocab_pipeline"), pipeline_problems)


@pytest.mark.mpi
@pytest.mark.task5_8
@pytest.mark.points(2)
@pytest.mark.time_limit(120)
def test_vocab_layers_and_pipeline_on_mpi():
    judge(VOCAB_MPI.outcomes(MPI_WORLD_SIZE, "vocab_layers"), layer_problems, layer_message_problems)
    judge(VOCAB_MPI.outcomes(MPI_WORLD_SIZE, "vocab_pipeline"), pipeline_problems)
