"""The hidden tests' cases: which runs each stage gets at each world size and backend, and the
suites that run them (each test function runs in its own process and launches only its cases).

World sizes 1, 2, 3, 4: the units (1,330 and 230 elements) divide by none of 2, 3, 4, so every
shard ends in padding; the tiny model (2 elements) at 3 and 4 leaves ranks with only padding.
"""

from __future__ import annotations

from assignments.common import case_suites
from assignments.hw6.tests import hw6_hybrid_groups as hybrid
from assignments.hw6.tests.hw6_harness import HW6_LAUNCH, HW6_WIRE, Case, Suite
from assignments.hw6.tests.hw6_inputs import make_inputs
from assignments.hw6.tests.hw6_ranks import OPS, run_cases_on_rank
from assignments.hw6.tests.hw6_setup import build_model, unit_sizes
from minitorch_dist.sharded.flat import padded_numel

WORLD_SIZES = (1, 2, 3, 4)
WORLD_PAIRS = ((1, 2), (3, 4))                 # one test function each (a bug seen only with padding-only ranks
                                               # still costs a test)


# Traffic per step: each step's collectives are scored from the steps' snapshots (hw6_ranks.run_training),
# which rank code can rewrite. On gloo with the kernel measuring, each ZeRO, FSDP and HSDP case runs in a
# launch of its own (rank_runs.run_batched apart=) and its steps' snapshots, with what the run does
# besides them, must add up to that launch's counters (case_suites.counted_by): at construction the
# whole model from rank 0 (broadcasts: the harness's or the provided constructor's, and the piece's own,
# whose calls and padding are the student's choice; HSDP's over the world, then FSDP's over the shard
# group), after the steps the harness's all-gather of every FSDP unit's shard (and full_parameters()'s,
# in the mixed-precision cases). HSDP's verdict also holds each step's trace to its snapshot
# (hw6_hybrid_checks.py).
STEP_COUNTED = {**{f"{op}_{i}": (lambda c, op=op, i=i: (c.op(op).calls, c.op(op).tensor_bytes)[i])
                   for op in OPS for i in (0, 1)},
                "p2p_0": lambda c: c.messages_sent, "p2p_1": lambda c: c.bytes_sent}
BOUND_STAGES = ("zero1", "zero2", "fsdp", "hsdp")


def _itemsize(case: Case) -> int:
    return hybrid.itemsize(case)


def besides_steps(case: Case, rank: int, p: int) -> dict:
    """What a rank's run does outside its steps' snapshots: the model's broadcast (one call at least) and,
    under FSDP, the gathers of the units' shards; HSDP's (hw6_hybrid_groups.besides_steps)."""
    if case.stage == "hsdp":
        return {f"{op}_{i}": v[i] for op, v in hybrid.besides_steps(case, p).items() for i in (0, 1)}
    _, whole = hybrid.model_bytes(case)
    out = {"broadcast_0": 1, "broadcast_1": whole}
    if case.stage == "fsdp":
        gathers = 2 if case.mixed else 1
        out["all_gather_0"] = gathers * len(unit_sizes(case))
        out["all_gather_1"] = gathers * sum(padded_numel(n, p) // p for n in unit_sizes(case)) * _itemsize(case)
    return out


def _padding(case: Case, rank: int, p: int) -> dict:
    """The broadcasts may carry the flat shards' padding (under p elements a unit or bucket)."""
    pieces = len(unit_sizes(case)) if case.stage in ("fsdp", "hsdp") else len(list(build_model(case).parameters()))
    return {"broadcast_1": pieces * p * _itemsize(case)}


def _snapshots(case: Case, rep: dict):
    steps = rep.get("steps")
    if not isinstance(steps, list):
        return None
    return [{f"{op}_{i}": v[i] for op, v in s["comm"].items() for i in (0, 1)} for s in steps]


def per_step_traffic(case: Case, p: int) -> bool:
    return p > 1 and case.stage in BOUND_STAGES


_, StepSuite = case_suites.bind(run_cases_on_rank, make_inputs=make_inputs, apart=per_step_traffic,
                                counted=case_suites.counted_by(STEP_COUNTED, _snapshots, lambda case: ("broadcast_0",),
                                                               besides=besides_steps, slack=_padding),
                                **HW6_WIRE, **HW6_LAUNCH)


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
