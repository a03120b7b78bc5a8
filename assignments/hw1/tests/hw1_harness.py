"""Homework 1 test harness: run cases on ranks and bring back what they computed.

    python -m pytest assignments/hw1/tests                 # every public test
    python -m pytest assignments/hw1/tests -m task1_7      # one task's tests

A test describes its inputs as Cases (function, n, dtype, op, inputs, root). The harness runs
a list of cases on p ranks in one launch (launch per world size, not per case: a launch on a
warm pool costs milliseconds, a new world size about half a second) with the provided
collectives switched off, as HW1 requires. Every rank's x is made here, in the grading process,
from the grading's secret (hw1_inputs.py), and each rank receives only its own; the Outcome keeps
all of them. Each rank returns, per case, its x after the call, the returned value and its
message counters. Ranks never assert: the verdict is taken in the grading process (hw1_checks.py)
against a single-process reference computed from the kept inputs.

Files: hw1_ranks.py (cases, rank code), hw1_inputs.py (the inputs), this file (launching, suites),
hw1_checks.py (the verdict), assignments/common/rank_runs.py (batched launches, the stub memo and the
judge) and rank_inputs.py (inputs from the secret), shared by every homework, and one_rank.py (a
single call such as fit_alpha_beta, on one rank). They are
modules of the package `assignments`, imported by full name (assignments.hw1.tests.hw1_ranks): rank
functions are pickled by reference, and a rank imports them from the kit root. A case that raises on
a rank stops the launch; the harness records that case's error and runs the other cases again, so
one failing case does not hide the others. A stub's NotImplementedError is recorded for every case
of that function without stopping the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assignments.common import rank_runs
from assignments.hw1.tests.hw1_inputs import constants, make_inputs
from assignments.hw1.tests.hw1_ranks import (BAD_INPUTS, DTYPES, Case, rank_all_but_last,  # noqa: F401
                                             rank_call_bad, rank_ping_pong, run_cases_on_rank)
from minitorch_dist import SimNetwork

TASK_OF = {"ping_pong": "task1_1", "fit_alpha_beta": "task1_1", "broadcast": "task1_2", "reduce": "task1_2",
           "reduce_scatter_": "task1_3", "all_gather_": "task1_3", "all_gather": "task1_3",
           "reduce_scatter": "task1_3", "naive_all_reduce": "task1_4", "tree_all_reduce": "task1_5",
           "butterfly_all_reduce": "task1_6", "ring_all_reduce": "task1_7"}
HW1_LAUNCH = {"collectives": False, "trace": False}      # HW1 builds the collectives; no trace needed
__all__ = ["BAD_INPUTS", "DTYPES", "Case", "make_inputs", "rank_all_but_last", "rank_call_bad", "rank_ping_pong",
           "Outcome", "launch_hw1", "try_launch", "run_cases", "select_tasks", "Suite"]
select_tasks = rank_runs.select_tasks


@dataclass
class Outcome:
    """What p ranks did with one case. error is None when every rank returned."""

    case: Case
    p: int
    backend: str
    inputs: list = field(default_factory=list)     # x before the call, per rank (made here, hw1_inputs.py)
    xs: list = field(default_factory=list)         # x after the call, per rank
    rets: list = field(default_factory=list)       # returned tensor when it is not x itself, else None
    ret_is_x: list = field(default_factory=list)   # the call returned x itself, per rank
    ret_types: list = field(default_factory=list)  # type name of the returned value, per rank
    counts: list = field(default_factory=list)     # per rank: messages/bytes sent and received, collectives
    error: str | None = None
    sim_time: float | None = None                  # simulated seconds, when the run held this case alone

    @property
    def label(self) -> str:
        held = f", c = {constants(self.case, self.p)}" if self.case.inputs == "constant" else ""
        return f"{self.case.describe(self.p)}{held} on {self.backend}"


# -- in the grading process -----------------------------------------------------------------
def launch_hw1(fn, p: int, args=(), backend: str = "gloo", network: SimNetwork | None = None):
    """launch() as HW1 tests use it: provided collectives off, no trace, deadline from the env.

    MINITORCH_DIST_DEADLINE (seconds) sets how long a blocking op may wait before the
    runtime reports a deadlock; without it the harness uses rank_runs.DEFAULT_DEADLINE.
    """
    return rank_runs.launch_for_tests(fn, p, args, backend, network, **HW1_LAUNCH)


def try_launch(fn, p: int, args=(), backend: str = "gloo", network: SimNetwork | None = None):
    """(RunResult, None), or (None, the RankError) when a rank raised: judge it outside the except."""
    return rank_runs.try_launch(fn, p, args, backend, network, **HW1_LAUNCH)


def _leaked(per_rank: list[dict]) -> bool:
    c = [r["counts"] for r in per_rank]
    return sum(d["sent"] for d in c) != sum(d["recv"] for d in c)


def run_cases(cases, p: int, backend: str = "gloo", network: SimNetwork | None = None) -> list[Outcome]:
    """Run `cases` on p ranks; one Outcome per case, in order (errors recorded, never raised)."""
    cases = list(cases)
    inputs = [make_inputs(case, p) for case in cases]
    got = rank_runs.run_batched(run_cases_on_rank, cases, p, key=lambda c: c.fn, describe=Case.describe,
                                backend=backend, network=network, leaked=_leaked, inputs=inputs, check_wire=True,
                                compute=False, **HW1_LAUNCH)
    return [_outcome(case, p, backend, xs, res) for case, xs, res in zip(cases, inputs, got)]


def _outcome(case: Case, p: int, backend: str, inputs: list, res: tuple) -> Outcome:
    if res[0] == "error":
        return Outcome(case, p, backend, inputs, error=res[1])
    per_rank = res[1]
    return Outcome(case, p, backend, inputs, xs=[r["x"] for r in per_rank], rets=[r["ret"] for r in per_rank],
                   ret_is_x=[r["ret_is_x"] for r in per_rank], ret_types=[r["ret_type"] for r in per_rank],
                   counts=[r["counts"] for r in per_rank], sim_time=res[2])


# -- suites: the cases of a test file, run once per world size ------------------------------
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
                     if rank_runs.selected(TASK_OF[c.fn])]
            self._runs[p] = run_cases(cases, p, self.backend, self.network)
        found = [o for o in self._runs[p] if o.case.fn == fn and (tag is None or o.case.tag == tag)]
        if not found:
            raise LookupError(f"harness: no case of {fn} (tag {tag!r}) at p={p} on {self.backend}; "
                              f"selected tasks: {rank_runs.selected_tasks()}")
        return found
