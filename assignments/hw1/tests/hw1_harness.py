"""Homework 1 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw1/tests                 # every public test
    python -m pytest assignments/hw1/tests -m task1_7      # one task's tests

A test describes its inputs as Cases (function, n, dtype, op, inputs, root). The harness runs
a list of cases on p ranks in one launch (launch per world size, not per case: a launch on a
warm pool costs milliseconds, a new world size about half a second) with the provided
collectives switched off, as HW1 requires. Each rank returns, per case, its x after the call,
the returned value and its message counters. Ranks never assert: the verdict is taken in the
grading process (hw1_checks.py) against a single-process reference.

Files: hw1_ranks.py (cases, inputs, rank code), this file (launching, suites), hw1_checks.py
(the verdict). A case that raises on a rank stops the launch; the harness records that case's error and
runs the other cases again, so one failing case does not hide the others. A stub's
NotImplementedError is recorded for every case of that function without stopping the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from minitorch_dist import LaunchError, RankError, SimNetwork, launch, shutdown

from hw1_ranks import (BAD_INPUTS, DTYPES, Case, CaseFailed, make_input, rank_all_but_last,  # noqa: F401
                       rank_call_bad, rank_ping_pong, run_cases_on_rank)

TASK_OF = {"ping_pong": "task1_1", "fit_alpha_beta": "task1_1", "broadcast": "task1_2", "reduce": "task1_2",
           "reduce_scatter_": "task1_3", "all_gather_": "task1_3", "all_gather": "task1_3",
           "reduce_scatter": "task1_3", "naive_all_reduce": "task1_4", "tree_all_reduce": "task1_5",
           "butterfly_all_reduce": "task1_6", "ring_all_reduce": "task1_7"}
DEFAULT_DEADLINE = 10.0    # seconds a blocking op may wait (MINITORCH_DIST_DEADLINE overrides it)
RUN_TIMEOUT = 180.0        # wall-clock limit of one launch (gloo/mpi), for code stuck outside comm ops
MAX_FAILURES_PER_FN = 3    # after this many failed cases of one function (one deadlock), its others are not run
__all__ = ["BAD_INPUTS", "DTYPES", "Case", "make_input", "rank_all_but_last", "rank_call_bad", "rank_ping_pong",
           "Outcome", "launch_hw1", "try_launch", "run_cases", "select_tasks", "Suite"]


@dataclass
class Outcome:
    """What p ranks did with one case. error is None when every rank returned."""

    case: Case
    p: int
    backend: str
    xs: list = field(default_factory=list)         # x after the call, per rank
    rets: list = field(default_factory=list)       # returned tensor when it is not x itself, else None
    ret_is_x: list = field(default_factory=list)   # the call returned x itself, per rank
    ret_types: list = field(default_factory=list)  # type name of the returned value, per rank
    counts: list = field(default_factory=list)     # per rank: messages/bytes sent and received, collectives
    error: str | None = None
    sim_time: float | None = None                  # simulated seconds, when the run held this case alone

    @property
    def label(self) -> str:
        return f"{self.case.describe(self.p)} on {self.backend}"


# -- in the grading process -----------------------------------------------------------------
def launch_hw1(fn, p: int, args=(), backend: str = "gloo", network: SimNetwork | None = None):
    """launch() as HW1 tests use it: provided collectives off, no trace, deadline from the env.

    MINITORCH_DIST_DEADLINE (seconds) sets how long a blocking op may wait before the
    runtime reports a deadlock; without it the harness uses DEFAULT_DEADLINE.
    """
    deadline = "default" if os.environ.get("MINITORCH_DIST_DEADLINE") else DEFAULT_DEADLINE
    if backend == "sim":
        return launch(fn, p, args=args, backend="sim", collectives=False, trace=False,
                      network=network or SimNetwork())
    return launch(fn, p, args=args, backend=backend, collectives=False, trace=False,
                  deadline=deadline, timeout=RUN_TIMEOUT)


def try_launch(fn, p: int, args=(), backend: str = "gloo", network: SimNetwork | None = None):
    """(RunResult, None), or (None, the RankError) when a rank raised: judge it outside the except."""
    try:
        return launch_hw1(fn, p, args, backend, network), None
    except RankError as err:
        return None, err


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


# Functions that raised NotImplementedError (stubs): their later cases fail without a launch.
NOT_IMPLEMENTED: dict[str, str] = {}


def run_cases(cases, p: int, backend: str = "gloo", network: SimNetwork | None = None) -> list[Outcome]:
    """Run `cases` on p ranks; one Outcome per case, in order (errors recorded, never raised)."""
    cases = list(cases)
    outcomes: list[Outcome | None] = [None] * len(cases)
    failures: dict[str, int] = {}
    pending = []
    for i, case in enumerate(cases):
        if case.fn in NOT_IMPLEMENTED:
            outcomes[i] = Outcome(case, p, backend, error=NOT_IMPLEMENTED[case.fn])
        else:
            pending.append(i)
    while pending:
        batch = [cases[i] for i in pending]
        try:
            result = launch_hw1(run_cases_on_rank, p, args=(batch,), backend=backend, network=network)
        except (RankError, LaunchError) as err:
            failed = getattr(err, "cause", None)
            if not isinstance(failed, CaseFailed):
                _run_apart(cases, pending, outcomes, p, backend, network, err)
                break
            i = pending[failed.index]
            later = set(pending[failed.index + 1:])        # not reached: cases before it succeeded
            where = f"\n{failed.where}" if failed.where else ""
            outcomes[i] = Outcome(cases[i], p, backend, error=f"rank {err.rank} raised {failed.exc_type}: "
                                                              f"{failed.message}{where}")
            # a deadlock costs a deadline per run, and a stub fails every case the same way
            weight = MAX_FAILURES_PER_FN if failed.exc_type in ("DeadlockError", "NotImplementedError") else 1
            failures[cases[i].fn] = failures.get(cases[i].fn, 0) + weight
            pending.remove(i)
            for j in [j for j in pending if j in later and failures.get(cases[j].fn, 0) >= MAX_FAILURES_PER_FN]:
                outcomes[j] = Outcome(cases[j], p, backend, error=f"not run: {cases[j].fn} failed on other "
                                      f"cases at p={p} ({failed.exc_type} in {cases[i].describe(p)})")
                pending.remove(j)
            continue
        leak = None
        for k, i in enumerate(pending):
            outcomes[i] = _outcome(cases[i], p, backend, [r[k] for r in result])
            if len(pending) == 1:
                outcomes[i].sim_time = result.sim_time
            c = outcomes[i].counts
            if leak is None and c and sum(d["sent"] for d in c) != sum(d["recv"] for d in c):
                leak = k                           # a message left in flight may reach later cases
        if leak is None or leak == len(pending) - 1:
            if leak is not None:
                shutdown()
            break
        shutdown()                                 # fresh processes, no stale message: run the rest again
        pending = pending[leak + 1:]
    return outcomes


def _run_apart(cases, pending, outcomes, p, backend, network, err) -> None:
    """A launch failed without naming its case (a rank died, a timeout): run each function alone."""
    fns = sorted({cases[i].fn for i in pending})
    if len(fns) > 1:
        for fn in fns:
            mine = [i for i in pending if cases[i].fn == fn]
            for i, o in zip(mine, run_cases([cases[i] for i in mine], p, backend, network)):
                outcomes[i] = o
        return
    for i in pending:
        outcomes[i] = Outcome(cases[i], p, backend, error=f"{type(err).__name__}: {_first_line(str(err))}")


def _outcome(case: Case, p: int, backend: str, per_rank: list[dict]) -> Outcome:
    errors = [r["error"] for r in per_rank if "error" in r]
    if errors:
        if errors[0].startswith("NotImplementedError: "):
            NOT_IMPLEMENTED[case.fn] = errors[0]
        return Outcome(case, p, backend, error=errors[0])
    return Outcome(case, p, backend, xs=[r["x"] for r in per_rank], rets=[r["ret"] for r in per_rank],
                   ret_is_x=[r["ret_is_x"] for r in per_rank], ret_types=[r["ret_type"] for r in per_rank],
                   counts=[r["counts"] for r in per_rank])


# -- suites: the cases of a test file, run once per world size ------------------------------
_selected_tasks: set[str] | None = None


def select_tasks(items) -> None:
    """Remember the task markers of the collected tests (pytest_collection_finish), so that a
    suite runs only the functions of the selected tasks (`pytest -m task1_7` runs no naive case)."""
    global _selected_tasks
    tasks = {m.name for item in items for m in item.iter_markers() if m.name.startswith("task")}
    _selected_tasks = tasks or None


class Suite:
    """The cases of a set of tests, run on first use once per world size and kept.

    make_cases(p) -> [Case]; outcomes(p, fn, tag) -> that function's Outcomes at p.
    """

    def __init__(self, make_cases, backend: str = "gloo", network: SimNetwork | None = None):
        self.make_cases, self.backend, self.network = make_cases, backend, network
        self._runs: dict[int, list[Outcome]] = {}

    def outcomes(self, p: int, fn: str, tag: str | None = None) -> list[Outcome]:
        if p not in self._runs:
            cases = [c for c in self.make_cases(p)
                     if _selected_tasks is None or TASK_OF[c.fn] in _selected_tasks]
            self._runs[p] = run_cases(cases, p, self.backend, self.network)
        found = [o for o in self._runs[p] if o.case.fn == fn and (tag is None or o.case.tag == tag)]
        if not found:
            raise LookupError(f"harness: no case of {fn} (tag {tag!r}) at p={p} on {self.backend}; "
                              f"selected tasks: {_selected_tasks}")
        return found
