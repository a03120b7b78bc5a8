"""Homework 6 test harness, the verdict: taken in the grading process from what the ranks returned.

    judge(outcomes, result_problems, comm_problems, memory_problems, prefetch_problems)

Results: after k steps every rank's parameters equal one process's on the global batches (float64:
within 1e-9; float32: 1e-5; bf16 compute: 3e-2 after SGD steps; after construction (0 steps), from
ranks that started apart: bitwise rank 0's). The batches and the weights of ranks that start apart
are drawn from the grading's secret; each rank was sent only its rows and its weights (hw6_inputs.py).
How: per step exactly the collectives of the stage (ZeRO-1: one reduce-scatter of the padded
gradient and one all-gather of the shards; ZeRO-2: one reduce-scatter per bucket; FSDP: per unit
two all-gathers and one reduce-scatter), their bytes, nothing else: ZeRO-1/2 send what a ring
all-reduce (DDP) sends, FSDP 1.5 times that. Memory from the tracker (minitorch_dist.memory):
shards of padded / p elements, optimizer state for the shard only, ZeRO-2 and FSDP gradients for
the shard only, FSDP parameters for the shards only outside forward and at most the outer unit
and one block (two with prefetch) gathered during it. Prefetch: the all-gather of each block was
posted before that block's forward (and backward) asked for it.
"""

from __future__ import annotations



from assignments.common.rank_runs import judge  # noqa: F401 (the tests import it from here)
from assignments.hw6.tests.hw6_harness import Outcome
from assignments.hw6.tests.hw6_inputs import reference
from assignments.hw6.tests.hw6_setup import ZERO2_BUCKET, build_model, unit_sizes
from minitorch_dist.sharded.flat import buckets_by_size, padded_numel

STATE_PER_ELEMENT = {"adamw": 2, "sgd": 1}


def _tol(o: Outcome) -> float:
    c = o.case
    if c.mixed:
        return 3e-2
    if c.steps == 0:
        return 0.0
    return 1e-5 if c.dtype == "float32" else 1e-9


def result_problems(o: Outcome) -> list[str]:
    """Every rank's parameters equal the single-process run's after case.steps steps."""
    if o.error is not None:
        return [o.error]
    want, tol, problems = reference(o.case, o.p), _tol(o), []
    for r, rep in enumerate(o.ranks):
        got = rep["params"]
        if sorted(got) != sorted(want):
            problems.append(f"rank {r}: parameters {sorted(got)}; expected {sorted(want)}")
            continue
        for name, w in want.items():
            g = got[name]
            if g.shape != w.shape:
                problems.append(f"rank {r}: {name} has shape {tuple(g.shape)}, expected {tuple(w.shape)}")
                continue
            diff = (g.double() - w.double()).abs().flatten()
            if diff.numel() and not bool(diff.max() <= tol):
                i = int(diff.argmax())
                problems.append(f"rank {r}: {name} after {o.case.steps} steps differs from one process on the "
                                f"global batch: element {i} is {g.flatten()[i].item():.8g}, expected "
                                f"{w.flatten()[i].item():.8g} (|diff| {diff[i].item():.3g} > {tol:g})")
    if o.case.mixed:
        problems += _mixed_problems(o)
    return problems


def _mixed_problems(o: Outcome) -> list[str]:
    problems = []
    for r, rep in enumerate(o.ranks):
        d = rep["dtypes"]
        if d != {"shards": ["torch.float32"], "grads": ["torch.float32"], "full": ["torch.bfloat16"]}:
            problems.append(f"rank {r}: dtypes {d}; expected float32 shards and shard gradients, bfloat16 "
                            f"gathered parameters")
        for name, t in rep["params"].items():
            if str(t.dtype) != "torch.float32":
                continue                                  # a frozen parameter, kept in bf16
            g = rep["gathered"].get(name)
            if g is None or g.dtype != t.dtype or not bool((g == t).all()):
                problems.append(f"rank {r}: full_parameters()[{name!r}] is not the float32 master value "
                                f"(bitwise) of the shards")
                break
    return problems


# -- sizes the stages must have ------------------------------------------------------------------
def trainable_numels(case) -> list[int]:
    return [q.numel() for q in build_model(case).parameters() if q.requires_grad]


def ways(o: Outcome) -> int:
    """How many ranks share one copy of the model: p, or the shard group's size under HSDP."""
    return o.case.shard_size if o.case.stage == "hsdp" else o.p


def expected_shards(o: Outcome) -> list[int]:
    """Elements of each shard a rank holds (one per FSDP unit; one for ZeRO)."""
    p, numels = ways(o), trainable_numels(o.case)
    if o.case.stage in ("fsdp", "hsdp"):
        return [padded_numel(n, p) // p for n in unit_sizes(o.case)]
    if o.case.stage == "zero2":
        return [sum(padded_numel(sum(numels[i] for i in b), p) // p for b in buckets_by_size(numels, ZERO2_BUCKET))]
    return [padded_numel(sum(numels), p) // p]


def _itemsize(case, compute: bool = False) -> int:
    return 2 if (compute and case.mixed) else 4 if case.dtype == "float32" else 8


def expected_comm(o: Outcome) -> dict:
    """{op: [calls, tensor bytes]} of one step of the case's stage."""
    p, c, numels = o.p, o.case, trainable_numels(o.case)
    es = _itemsize(c)
    want = {"all_reduce": [0, 0], "broadcast": [0, 0], "p2p": [0, 0]}
    if c.stage == "fsdp":
        sizes = unit_sizes(c)
        want["all_gather"] = [2 * len(sizes), 2 * sum(padded_numel(n, p) // p for n in sizes) * _itemsize(c, True)]
        want["reduce_scatter"] = [len(sizes), sum(padded_numel(n, p) for n in sizes) * es]
    elif c.stage == "zero2":
        buckets = buckets_by_size(numels, ZERO2_BUCKET)
        padded = [padded_numel(sum(numels[i] for i in b), p) for b in buckets]
        want["all_gather"] = [1, sum(padded) // p * es]
        want["reduce_scatter"] = [len(buckets), sum(padded) * es]
    else:
        want["all_gather"] = [1, padded_numel(sum(numels), p) // p * es]
        want["reduce_scatter"] = [1, padded_numel(sum(numels), p) * es]
    return want


def ring_bytes(comm: dict, p: int) -> float:
    """Bytes a rank sends per step if every collective is a ring: all-reduce 2(p-1)/p n, reduce-scatter
    (p-1)/p n, all-gather (p-1) m (m its input), broadcast n."""
    return (2 * (p - 1) / p * comm["all_reduce"][1] + (p - 1) / p * comm["reduce_scatter"][1]
            + (p - 1) * comm["all_gather"][1] + comm["broadcast"][1])


WHY = {"zero1": "ZeRO-1: one reduce-scatter of the flat padded gradient, one all-gather of the updated shards",
       "zero2": "ZeRO-2: one reduce-scatter per gradient bucket (during backward), one all-gather of the shards",
       "fsdp": "FSDP: per unit an all-gather before forward, another before backward, a reduce-scatter of "
               "its gradient; no all-reduce"}


def comm_problems(o: Outcome) -> list[str]:
    """Each step's collectives are exactly the stage's (calls and bytes), nothing point to point."""
    if o.error is not None:
        return [o.error]
    if not o.case.steps:
        return []
    want, problems = expected_comm(o), []
    ddp = 2 * (o.p - 1) / o.p * sum(trainable_numels(o.case)) * _itemsize(o.case)
    for r, rep in enumerate(o.ranks):
        for s, step in enumerate(rep["steps"]):
            got = {k: step["comm"][k] for k in want}
            if got != want:
                wrong = [f"{k}: {got[k][0]} calls / {got[k][1]} B (expected {want[k][0]} / {want[k][1]} B)"
                         for k in want if got[k] != want[k]]
                problems.append(f"rank {r}, step {s}: {'; '.join(wrong)}. Expected {WHY[o.case.stage]}. As a ring "
                                f"that sends {ring_bytes(got, o.p):.0f} B per rank (expected "
                                f"{ring_bytes(want, o.p):.0f} B; DDP's all-reduce: {ddp:.0f} B)")
                break
    return problems


# -- memory ----------------------------------------------------------------------------------------
def _replicated_bytes(case) -> int:
    model = build_model(case)
    es = _itemsize(case, True)
    frozen = sum(q.numel() for q in model.parameters() if not q.requires_grad)
    return (frozen + sum(b.numel() for b in model.buffers())) * es


def memory_problems(o: Outcome) -> list[str]:
    """Shard sizes, optimizer state, gradients and parameters per rank, from the memory tracker."""
    if o.error is not None:
        return [o.error]
    c, p, problems = o.case, ways(o), []
    if not c.steps:
        return []
    shards, es, numels = expected_shards(o), _itemsize(o.case), trainable_numels(o.case)
    shard_bytes = sum(shards) * es
    for r, rep in enumerate(o.ranks):
        if rep["shard_numels"] != shards:
            problems.append(f"rank {r}: shards of {rep['shard_numels']} elements; expected {shards} (each unit "
                            f"padded to a multiple of {p}, then / {p})")
            continue
        last = rep["steps"][-1]
        state, n_tensors = last["after_step"]["optimizer"], len(shards)
        lo = STATE_PER_ELEMENT[c.optim] * shard_bytes
        if not lo <= state <= lo + 8 * n_tensors:
            problems.append(f"rank {r}: optimizer state of {state} B; expected {lo} B ({STATE_PER_ELEMENT[c.optim]} "
                            f"x the shard, {sum(shards)} elements): about 1/{p} of DDP's "
                            f"{STATE_PER_ELEMENT[c.optim] * sum(numels) * es} B")
        grads = last["grads_at_step"]
        if c.stage == "zero1" and grads > sum(numels) * es + shard_bytes:
            problems.append(f"rank {r}: {grads} B of gradients before the step; ZeRO-1 holds the full gradients "
                            f"({sum(numels) * es} B) and the shard's ({shard_bytes} B)")
        flat = padded_numel(sum(numels), p) * es + _replicated_bytes(c)
        if c.stage == "zero1" and last["after_step"]["params"] > flat:
            problems.append(f"rank {r}: {last['after_step']['params']} B of parameters after the step; expected "
                            f"{flat} B (the padded flat parameters, frozen ones and buffers): keep no copy of the "
                            f"shard, make it a view of the flat buffer the parameters are views of")
        if c.stage in ("zero2", "fsdp", "hsdp") and grads > shard_bytes:
            problems.append(f"rank {r}: {grads} B of gradients before the step; expected only the shard's "
                            f"{shard_bytes} B (1/{p} of {sum(numels) * es} B): free the full gradients once "
                            f"they are reduce-scattered")
        if c.stage == "zero2":
            buckets = buckets_by_size(numels, ZERO2_BUCKET)
            bound = shard_bytes + (max(padded_numel(sum(numels[i] for i in b), p) for b in buckets) + max(numels)) * es
            if last["peak"]["grads"] > bound:
                problems.append(f"rank {r}: {last['peak']['grads']} B of gradients at the peak of backward; at most "
                                f"the shard and about one bucket ({bound} B) expected")
        if c.stage in ("fsdp", "hsdp"):
            problems += _fsdp_memory(o, r, last, shard_bytes)
    return problems


def _fsdp_memory(o: Outcome, r: int, last: dict, shard_bytes: int) -> list[str]:
    c, p, problems = o.case, ways(o), []
    rest = _replicated_bytes(c)
    after = last["after_step"]["params"]
    if after > shard_bytes + rest:
        problems.append(f"rank {r}: {after} B of parameters after the step; expected the shards ({shard_bytes} B) "
                        f"and the frozen parameters and buffers ({rest} B): a gathered unit was not freed")
    sizes = [padded_numel(n, p) for n in unit_sizes(c)]
    outer, blocks = sizes[-1], sorted(sizes[:-1], reverse=True)
    gathered = outer + sum(blocks[:2 if c.prefetch else 1])
    bound = shard_bytes + rest + gathered * _itemsize(c, True)
    for when, peak in (("forward", last["forward"]["peak"]["params"]), ("the step", last["peak"]["params"])):
        if peak > bound:
            problems.append(f"rank {r}: {peak} B of parameters at the peak of {when}; at most the shards, the "
                            f"replicated tensors, the outer unit and {2 if c.prefetch else 1} block(s) gathered "
                            f"({bound} B)")
            break
    return problems


def checkpoint_problems(plain: Outcome, ckpt: Outcome) -> list[str]:
    """Checkpointing each block keeps less than half the saved activations of the plain run."""
    if plain.error or ckpt.error:
        return [e for e in (plain.error, ckpt.error) if e]
    got = max(rep["steps"][-1]["forward"]["peak"]["activations"] for rep in ckpt.ranks)
    base = max(rep["steps"][-1]["forward"]["peak"]["activations"] for rep in plain.ranks)
    if not got < base / 2:
        return [f"with checkpointing the forward keeps {got} B of saved activations, without {base} B: each "
                f"block's forward should run under checkpointing (only its input saved)"]
    return []


# -- prefetch --------------------------------------------------------------------------------------
def prefetch_problems(o: Outcome) -> list[str]:
    """Each block's all-gather was in flight before its forward (and its backward) began."""
    if o.error is not None:
        return [o.error]
    problems = []
    for r, rep in enumerate(o.ranks):
        step = rep["steps"][-1]
        gathers = [(start, end) for op, start, end, *_ in step["events"] if op == "all_gather"]
        for when, times in (("forward", step["fwd_times"]), ("backward", step["bwd_times"])):
            for i, t in enumerate(times):
                after = [g for g in gathers if g[1] >= t]
                first = min(after, key=lambda g: g[1]) if after else None
                if first is None or first[0] > t:
                    problems.append(f"rank {r}: the all-gather of block {i} for its {when} started only when the "
                                    f"block needed it: with prefetch it must be posted (async) while the "
                                    f"previous unit computes")
                    break
    return problems




# -- bad input -------------------------------------------------------------------------------------
def bad_input_problems(o: Outcome) -> list[str]:
    """Every rank raised TypeError (an optimizer name for a class) or ValueError (a model without
    blocks, a shard_size that does not divide p), with a message that names the argument."""
    if o.error is not None:
        return [o.error]
    want = {"bad_zero": ("TypeError", "optimizer_class"), "bad_fsdp": ("ValueError", "blocks"),
            "bad_hsdp": ("ValueError", "shard_size")}[o.case.stage]
    problems = []
    for r, rep in enumerate(o.ranks):
        if rep["raised"] != want[0] or want[1] not in rep["message"]:
            problems.append(f"rank {r}: raised {rep['raised']}({rep['message'][:150]!r}); expected {want[0]} "
                            f"naming {want[1]!r}")
    return problems
