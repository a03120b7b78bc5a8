"""The hidden tests' cases: which pieces run at each TP size and backend, and the suites that run
them (once per world size; each test function runs in its own process and launches only the
cases it judges).

TP sizes 1, 2, 4 use config A (d_model 32, 4 heads), 3 and 6 config B (d_model 48, 6 heads); the
vocabulary (48), hidden size (4 d_model) and sequence (12) divide all of them.
"""

from __future__ import annotations

from assignments.hw4.tests.hw4_harness import Case, Suite
from assignments.hw4.tests.hw4_setup import BAD_KINDS, BLOCK_KINDS, COMM_KINDS, LINEAR_KINDS

WORLD_SIZES = (1, 2, 3, 4)
COMM_WORLD_SIZES = (2, 3, 4)         # at TP size 1 the provided wrappers bypass the ops (nothing to grade)
VOCAB_PIECES = ("embedding", "xent", "xent_large")
BAD_WORLD_SIZES = (3, 4)
SIM_WORLD_SIZE = 6
MPI_WORLD_SIZE = 2
SIM_KINDS = {"task4_1": COMM_KINDS, "task4_3": ("block",), "task4_4": ("model",)}
MPI_KINDS = {"task4_3": ("block",), "task4_4": ("xent", "model")}


def _cases(kinds):
    return lambda p: [Case(k) for k in kinds]


COMM = Suite(_cases(COMM_KINDS))
LINEAR = Suite(_cases(LINEAR_KINDS))
BLOCKS = Suite(_cases(BLOCK_KINDS))
VOCAB = Suite(_cases(VOCAB_PIECES))
MODEL = Suite(_cases(("model",)))
BAD = Suite(_cases(BAD_KINDS))
SP = Suite(_cases(("sp",)))
SIM = Suite(_cases(COMM_KINDS + ("block", "model")), backend="sim")
MPI = Suite(_cases(("block", "xent", "model")), backend="mpi")
