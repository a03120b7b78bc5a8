"""The hidden tests' cases: which runs each stage gets at each world size and backend, and the
suites that run them (each test function runs in its own process and launches only its cases).

World sizes 1, 2, 3, 4: the units (1,330 and 230 elements) divide by none of 2, 3, 4, so every
shard ends in padding; the tiny model (2 elements) at 3 and 4 leaves ranks with only padding.
"""

from __future__ import annotations

from assignments.hw6.tests.hw6_harness import Case, Suite
from assignments.hw6.tests.hw6_step_traffic import StepSuite

WORLD_SIZES = (1, 2, 3, 4)
WORLD_PAIRS = ((1, 2), (3, 4))                 # one test function each (a bug seen only with padding-only ranks
                                               # still costs a test)

# Traffic per step: the ZeRO, FSDP and HSDP suites are StepSuites (hw6_step_traffic.py, shared with the
# public tests): in a grading each such case runs alone, its steps' snapshots held to its run's counters.


def stage_cases(stage: str):
    """AdamW on the tied model; SGD with momentum on the frozen/buffer model, ranks starting from
    different weights; the 2-element model where some rank owns only padding."""
    def make(p: int) -> list[Case]:
        cases = [Case(stage, "adamw", "tied"), Case(stage, "sgd", "frozen", init="different" if p > 1 else "same")]
        if p >= 3:
            cases.append(Case(stage, "adamw", "tiny"))
        return cases
    return make


def float32_cases(stage: str):
    """float32 with torch.optim.SGD (momentum): ranks that start from different weights hold rank 0's,
    bitwise, after construction; after 3 steps they are within 1e-5 of one process."""
    return lambda p: [Case(stage, "sgd", "tied", dtype="float32", init="different", steps=0),
                      Case(stage, "sgd", "tied", dtype="float32", init="different")]


def prefetch_cases(p: int) -> list[Case]:
    return [Case("fsdp", "adamw", "tied", prefetch=True) if p == 2 else
            Case("fsdp", "sgd", "frozen", prefetch=True, init="different")]


def checkpoint_cases(p: int) -> list[Case]:
    return [Case("fsdp", "adamw", "tied", for_task="task6_4"), Case("fsdp", "adamw", "tied", checkpoint=True),
            Case("fsdp", "sgd", "frozen", prefetch=True, checkpoint=True)]


def mixed_cases(p: int) -> list[Case]:
    return [Case("fsdp", "sgd", "tied", dtype="float32", mixed=True, steps=2),
            Case("fsdp", "sgd", "frozen", dtype="float32", mixed=True, prefetch=True, steps=2)]


ZERO1, ZERO2, FSDP = StepSuite(stage_cases("zero1")), StepSuite(stage_cases("zero2")), StepSuite(stage_cases("fsdp"))
ZERO1_F32, FSDP_F32 = StepSuite(float32_cases("zero1")), StepSuite(float32_cases("fsdp"))
PREFETCH, CHECKPOINT, MIXED = StepSuite(prefetch_cases), StepSuite(checkpoint_cases), StepSuite(mixed_cases)
BAD = Suite(lambda p: [Case("bad_zero"), Case("bad_fsdp")])
SIM = Suite(lambda p: [Case("fsdp", "adamw", "frozen", prefetch=True)], backend="sim")
MPI = StepSuite(lambda p: [Case("fsdp", "sgd", "tied", checkpoint=True)], backend="mpi")   # measured as gloo's (hw2's MPI)


def hybrid_cases(p: int) -> list[Case]:
    """HSDP (6.6) at every shape of p ranks: p = 4 as 2 x 2 (AdamW, and SGD from weights apart on the
    frozen/buffer model); p = 3 as one shard group of 3 (FSDP; the 2-element model leaves rank 2 only
    padding) and as 3 replicas of 1 (DDP)."""
    if p == 4:
        return [Case("hsdp", "adamw", "tied", shard_size=2),
                Case("hsdp", "sgd", "frozen", init="different", shard_size=2)]
    return [Case("hsdp", "adamw", "tied", shard_size=3), Case("hsdp", "adamw", "tiny", shard_size=3),
            Case("hsdp", "sgd", "frozen", init="different", shard_size=1)]


HYBRID = StepSuite(hybrid_cases)
BAD_HYBRID = Suite(lambda p: [Case("bad_hsdp", shard_size=2)])       # at p = 3: 2 does not divide 3
