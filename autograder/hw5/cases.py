"""The hidden tests' cases: which runs happen at each pipeline size and backend, and the suites that
run them (once per world size; each test function runs in its own process and launches only the
cases it judges).

Pipeline sizes p = 1..4 (the models have 4 layers, so p = 4 is one layer per stage); micro-batches
m = 1, p and 2p+1 (never a multiple of p when m = 2p+1). At p > 1 the step functions and the executor
also run on sim with rendezvous messages (a send waits for its receive), where 1F1B with blocking
sends deadlocks as it would under MPI with large messages. On sim the harness builds its stages with
post_ahead=False: every receive is posted when it is needed, so a message order that can deadlock does.
"""

from __future__ import annotations

from assignments.hw5.tests.hw5_checks import exact_problems, memory_problems, message_problems, order_problems
from assignments.hw5.tests.hw5_harness import Case, GridSuite, Suite
from minitorch_dist import SimNetwork

WORLD_SIZES = (1, 2, 3, 4)
TRAINING_CHECKS = (exact_problems, message_problems, order_problems, memory_problems)
SIM_SIZES = {2: (3,), 3: (5,), 4: (4, 9)}            # p -> m of the bubble cases
FREE = SimNetwork(alpha=0.0, beta=0.0, eager_limit=0)  # free messages, each waiting for its receive (rendezvous)
MPI_WORLD_SIZE = 2


def _step_cases(kind: str):
    def make(p: int) -> list[Case]:
        runs = [Case(kind, "mlp", 2 * p + 1), Case(kind, "transformer", p)]
        if kind in ("gpipe", "1f1b", "boundary"):
            runs += [Case(kind, "mlp", 1)]
        if kind in ("gpipe", "1f1b"):
            runs += [Case(kind, "mlp", p)]
        return runs
    return make


BOUNDARY = Suite(_step_cases("boundary"))
GPIPE = Suite(_step_cases("gpipe"))
ONE_F_ONE_B = Suite(_step_cases("1f1b"))
SCHEDULES = Suite(lambda p: _step_cases("sched_gpipe")(p) + _step_cases("sched_1f1b")(p) + [Case("generators")])
CHECKPOINT = Suite(lambda p: [Case("ckpt_gpipe", "mlp", 2 * p + 1), Case("ckpt_gpipe", "transformer", p),
                              Case("ckpt_1f1b", "mlp", 2 * p + 1)])
BAD = Suite(lambda p: [Case("bad_batch", "transformer"), Case("bad_batch_1f1b", "mlp")])
SIM = Suite(lambda p: [Case(kind, "mlp", m) for kind in ("gpipe", "1f1b", "sched_1f1b") for m in SIM_SIZES[p]],
            backend="sim", network=FREE, alone=True)      # alone: each case's run timed by the sim's own clock
RENDEZVOUS = Suite(lambda p: [Case(kind, "mlp", 2 * p + 1) for kind in ("gpipe", "1f1b", "sched_1f1b")],
                   backend="sim", network=FREE)     # a blocking send waits for its receive here
DEADLOCK = Suite(lambda p: [Case("deadlock")], backend="sim")
MPI = Suite(lambda p: [Case("gpipe", "mlp", 3), Case("1f1b", "transformer", 3)], backend="mpi")

# bonus 5.7: interleaved 1F1B, 2 chunks per rank, on the 8-layer MLP (m = 3 and 4 are not multiples of p = 2
# and 3: a single round of m micro-batches); the bubble on sim for m >= p
INTERLEAVED = Suite(lambda p: [Case("interleaved", "deep_mlp", m) for m in {2: (3, 4), 3: (4,), 4: (5,)}[p]]
                    + ([Case("interleaved_generators")] if p == 2 else []))
INTERLEAVED_SIM = Suite(lambda p: [Case("interleaved", "deep_mlp", {2: 3, 4: 5}[p])], backend="sim",
                        network=FREE, alone=True)
# bonus 5.6: 2 stages x 2 replicas (p = 4), 1F1B in each replica, m = 3 per replica
GRID = GridSuite(lambda p: [Case("data_parallel", "mlp", 3), Case("data_parallel", "transformer", 2)])
# bonus 5.8: the vocabulary layers sharded over every rank (23 tokens: uneven shards at p = 2, 3, 4), the
# layers alone with logits near 1e3, and the pipeline step (m = p+1 at p > 1, never a multiple of p)
VOCAB = GridSuite(lambda p: [Case("vocab_layers", "vocab"), Case("vocab_pipeline", "vocab", p + 1 if p > 1 else 2)])
