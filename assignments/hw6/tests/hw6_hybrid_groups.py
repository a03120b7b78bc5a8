"""Homework 6 test harness: what a correct HSDP run (6.6) does on each of its groups, known in the
grading process (from the case and p alone, never from what the ranks report).

With N ranks and shard groups of s: rank w's shard group is the s consecutive ranks of its block
[w - w % s, w - w % s + s), its replica group the N/s ranks w % s, w % s + s, ... Each step, per unit
of padded n elements (a multiple of s), a rank calls, and nothing else:
    in its shard group:    2 all-gathers of n/s elements, 1 reduce-scatter of n elements
    in its replica group:  1 all-reduce of n/s elements (the gradient shard: 1/s of the gradient)
Outside the steps: the model's broadcast over the world (HybridShardedModel), FSDP's over the shard
group (the units' flat parameters, padded, and the frozen parameters and buffers), and the harness's
all-gather of every unit's shard at the end. At s = 1 the shard group is one rank, at s = N the
replica group: collectives there send nothing (lone_most bounds what a trace may claim there).
"""

from __future__ import annotations

from assignments.hw6.tests.hw6_setup import Case, build_model, unit_sizes
from minitorch_dist.sharded.flat import padded_numel


def itemsize(case: Case) -> int:
    return 4 if case.dtype == "float32" else 8


def model_bytes(case: Case) -> tuple[int, int]:
    """(tensors, bytes) of the case's model: its parameters (a tied one once) and buffers."""
    model = build_model(case)
    tensors = {id(t): t for t in list(model.parameters()) + list(model.buffers())}.values()
    return len(tensors), sum(t.nbytes for t in tensors)


def group_name(members) -> str:
    """The runtime's name of a sub-group of these world ranks (Group.subgroup), "#k" when made again."""
    return f"group{list(members)}"


def hybrid_members(rank: int, p: int, s: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shard group, replica group) of world rank `rank`, as tuples of world ranks."""
    first = rank - rank % s
    return tuple(range(first, first + s)), tuple(range(rank % s, p, s))


def members_of(name: str, rank: int, p: int, s: int) -> tuple:
    """The world ranks of the group a trace event names, if it is one a correct run uses (the world,
    this rank's shard or replica group, made again or not); else (name,)."""
    base = name.split("#", 1)[0]
    if base == "world":
        return tuple(range(p))
    for members in hybrid_members(rank, p, s):
        if base == group_name(members):
            return members
    return (name,)


def step_comm(case: Case, rank: int, p: int) -> dict:
    """{(op, group's world ranks): [calls, tensor bytes]} of one correct step on `rank`, every group."""
    s, es = case.shard_size, itemsize(case)
    shard, replica = hybrid_members(rank, p, s)
    padded = [padded_numel(n, s) for n in unit_sizes(case)]
    return {("all_gather", shard): [2 * len(padded), 2 * sum(padded) // s * es],
            ("reduce_scatter", shard): [len(padded), sum(padded) * es],
            ("all_reduce", replica): [len(padded), sum(padded) // s * es]}


def besides_steps(case: Case, p: int) -> dict:
    """{op: [calls, bytes]} of a correct run outside its steps: the world's and the shard group's
    broadcasts of the model (calls at least one each; the student's choice), the final gathers."""
    s, units = case.shard_size, unit_sizes(case)
    _, whole = model_bytes(case)
    return {"broadcast": [2, 2 * whole],
            "all_gather": [len(units), sum(padded_numel(n, s) // s for n in units) * itemsize(case)]}


def lone_most(case: Case, p: int) -> list[dict]:
    """Per rank {op: (calls, bytes)}: the most a correct run of the case does on one-rank groups (the
    shard group at s = 1, the replica group at s = p); run_batched's `lone`."""
    stage = case.stage
    if stage == "bad_hsdp":                          # its valid run first (hw6_ranks.run_bad_input)
        case, stage = Case("hsdp", model="tiny", steps=1, shard_size=1), "hsdp"
    if stage != "hsdp" or p < 2:
        return [{} for _ in range(p)]
    s, es = case.shard_size, itemsize(case)
    units = unit_sizes(case)
    tensors, whole = model_bytes(case)
    out = []
    for rank in range(p):
        most: dict = {}
        for (op, members), (calls, nbytes) in step_comm(case, rank, p).items():
            if len(members) == 1:
                most[op] = (case.steps * calls, case.steps * nbytes)
        if s == 1:                                   # FSDP over the lone shard group: its broadcasts, the gathers
            gather = most.get("all_gather", (0, 0))
            most["all_gather"] = (gather[0] + len(units), gather[1] + sum(units) * es)
            most["broadcast"] = (tensors + len(units), whole)
        out.append(most)
    return out


def subgroups(case: Case, p: int) -> list[list[int]]:
    """Per rank the sizes of the sub-groups a correct run of the case creates (run_batched's
    `subgroups`: their rendezvous is what a rank may receive from the job's store): HSDP's shard group
    of s ranks and replica group of p/s; bad_hsdp's valid run first (s = 1), its bad one makes none."""
    stage, s = case.stage, case.shard_size
    if stage == "bad_hsdp":
        stage, s = "hsdp", 1
    if stage != "hsdp" or not isinstance(s, int) or s < 1 or p % s:
        return [[] for _ in range(p)]
    return [[s, p // s] for _ in range(p)]
