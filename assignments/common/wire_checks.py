"""The kernel's word against the ranks' counters, for a harness's launch: wire_problems says why a run's
counters (group.counters, written in the rank processes) and the bytes the kernel counted between those
processes (RunResult.wire) cannot both be true; lone_allowance is what a batch of cases may put on
one-rank groups, where a collective moves nothing (observe/traffic_check.py has the bounds);
joined_subgroups what they may receive from the job's store (observe/store_check.py)."""

from __future__ import annotations

from minitorch_dist.runtime.observe.store_check import store_problems
from minitorch_dist.runtime.observe.traffic_check import WIDEST, disagreements


def lone_allowance(cases, p: int, lone=None) -> list[dict]:
    """Per rank {op: (calls, bytes)}: the most `cases`, run in one launch, do on one-rank groups (lone)."""
    most = [{} for _ in range(p)]
    for case in (cases if lone is not None else ()):
        for mine, add in zip(most, lone(case, p)):
            for op, (calls, nbytes) in add.items():
                c = mine.get(op, (0, 0))
                mine[op] = (c[0] + calls, c[1] + nbytes)
    return most


def joined_subgroups(cases, p: int, subgroups=None) -> list[list[int]]:
    """Per rank the sizes of the sub-groups `cases`, run in one launch, create in a correct run
    (subgroups(case, p) -> per rank [sizes]; default none)."""
    joined = [[] for _ in range(p)]
    for case in (cases if subgroups is not None else ()):
        for mine, sizes in zip(joined, subgroups(case, p)):
            mine += list(sizes)
    return joined


def wire_problems(result, traced: bool = False, lone_most=None, widest=None, joined=None) -> str | None:
    """The run's counters against the bytes the kernel counted between its rank processes
    (RunResult.wire: gloo and mpi, when measured): why they cannot both be true, or None. traced: the
    run recorded its trace (launch(trace=True)), whose groups tell which collectives ran on one rank, up
    to lone_most; widest: see run_batched (traffic_check.disagreements). First, what each rank received
    from the job's store against what the sub-groups it joins (`joined`, per rank their sizes:
    joined_subgroups) need there (store_check.py)."""
    if getattr(result, "wire", None) is None:
        return None
    side = store_problems(result.wire, joined)
    if side:
        return ("the ranks received data from the job's store, outside `group` (the kernel counted it):\n  " +
                "\n  ".join(side) + "\nExchange data only through `group`: the grader measures traffic outside "
                "your processes, the store's included.")
    problems = disagreements(result.counters, result.wire, traced=traced,   # wire_unseen: not yet (README)
                             events=result.events if traced else None, lone_most=lone_most,
                             backend=result.backend, widest=widest or WIDEST)
    if not problems:
        return None
    return ("the messages counted in the rank processes (group.counters) disagree with the bytes the "
            "kernel counted between them:\n  " + "\n  ".join(problems) +
            "\nCommunicate only through `group` and leave its counters alone: the grader measures traffic "
            "outside your processes.")
